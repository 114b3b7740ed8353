-- The visitor's country (ISO 3166-1 alpha-2, looked up in the process from the client address),
-- one more dimension of the hourly and daily visit rows. '' is "not known": a private or
-- loopback address, an address the data does not place, and every visit recorded before this
-- migration. The column is in the primary key like the other dimensions, so a batch still
-- upserts one row per combination; a constant default adds it without rewriting the tables.
ALTER TABLE visit_counts ADD COLUMN country text NOT NULL DEFAULT '' CHECK (country ~ '^([A-Z]{2})?$');
ALTER TABLE visit_counts DROP CONSTRAINT visit_counts_pkey,
  ADD PRIMARY KEY (code, hour, class, referrer, browser, os, device, country);

ALTER TABLE visit_days ADD COLUMN country text NOT NULL DEFAULT '' CHECK (country ~ '^([A-Z]{2})?$');
ALTER TABLE visit_days DROP CONSTRAINT visit_days_pkey,
  ADD PRIMARY KEY (code, day, class, referrer, browser, os, device, country);
