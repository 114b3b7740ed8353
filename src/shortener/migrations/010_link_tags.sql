-- Tags that the people who manage links put on them, to find them again
-- ("my links" filtered by tag). Normalised by the service: lower case,
-- 1 to 32 of a-z 0-9 _ -, at most 10 per link, no duplicates.
ALTER TABLE links ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
CREATE INDEX links_tags ON links USING gin (tags);
