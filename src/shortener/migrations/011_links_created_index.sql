-- The export of every link pages through them newest first by (created_at, code): with this
-- index each page is an index range scan, not a sort of the whole table.
CREATE INDEX links_created ON links (created_at DESC, code DESC);
