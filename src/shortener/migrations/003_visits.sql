-- Visit analytics, written by the same statement that counts the clicks, so a
-- link's visits always equal the clicks counted since this migration.
--
-- visit_counts: one row per (link, hour, traffic class, referrer host, browser,
-- OS, device) with how many visits fell in it. Upserted once per batch; a range
-- query of one link reads a contiguous slice of the primary key.
CREATE TABLE visit_counts (
  code text COLLATE "C" NOT NULL REFERENCES links (code) ON DELETE CASCADE,
  -- Whole UTC hours (date_trunc would depend on the session's time zone).
  hour timestamptz NOT NULL CHECK (extract(epoch FROM hour) % 3600 = 0),
  class text NOT NULL CHECK (class IN ('human', 'bot', 'preview')),
  referrer text NOT NULL,
  browser text NOT NULL,
  os text NOT NULL,
  device text NOT NULL,
  visits bigint NOT NULL CHECK (visits >= 1),
  PRIMARY KEY (code, hour, class, referrer, browser, os, device)
);

-- One row per link, UTC day and visitor: the visitor key is an HMAC of the
-- client address and User-Agent under that day's salt, so it only tells
-- visitors of the same day apart. Uniques of a day = rows of that day.
CREATE TABLE daily_visitors (
  code text COLLATE "C" NOT NULL REFERENCES links (code) ON DELETE CASCADE,
  day date NOT NULL,
  visitor_key bytea NOT NULL CHECK (octet_length(visitor_key) = 16),
  PRIMARY KEY (code, day, visitor_key)
);

-- The salt of each UTC day, shared by every instance. A day's salt is deleted
-- once the day is over: without it no one can recompute a visitor key from an
-- address and User-Agent.
CREATE TABLE visitor_salts (
  day date PRIMARY KEY,
  salt bytea NOT NULL CHECK (octet_length(salt) = 32)
);
