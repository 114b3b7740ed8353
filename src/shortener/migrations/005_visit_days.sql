-- Daily rollups of the visit tables, so a report over weeks reads one row per
-- day and combination rather than one per hour (a busy link has a hundred
-- hourly rows an hour: 72,000 for 30 days). They are copies: the hourly rows
-- and the visitor rows stay, and the redirect writes only those.
--
-- A day is rolled up once it is over and no visit of it can still be in
-- flight (an hour after its end, see rollUpVisitDay). visit_rollup.before
-- says how far: days before it are read from visit_days and visitor_days,
-- later ones from visit_counts and daily_visitors. The rollup of a day and
-- the move of `before` commit together, so one report statement sees either
-- the hourly rows or the daily ones of a day, never both or neither.

CREATE TABLE visit_days (
  code text COLLATE "C" NOT NULL REFERENCES links (code) ON DELETE CASCADE,
  day date NOT NULL,
  class text NOT NULL CHECK (class IN ('human', 'bot', 'preview')),
  referrer text NOT NULL,
  browser text NOT NULL,
  os text NOT NULL,
  device text NOT NULL,
  visits bigint NOT NULL CHECK (visits >= 1),
  PRIMARY KEY (code, day, class, referrer, browser, os, device)
);

-- Unique visitors of a link on a day: the number of its daily_visitors rows.
CREATE TABLE visitor_days (
  code text COLLATE "C" NOT NULL REFERENCES links (code) ON DELETE CASCADE,
  day date NOT NULL,
  visitors bigint NOT NULL CHECK (visitors >= 1),
  PRIMARY KEY (code, day)
);

-- One row. -infinity: nothing rolled up yet (the first rollup starts at the
-- oldest visit).
CREATE TABLE visit_rollup (
  single boolean PRIMARY KEY DEFAULT true CHECK (single),
  before date NOT NULL
);
INSERT INTO visit_rollup (before) VALUES ('-infinity');

-- The rollup of a day reads every link's rows of that day. Rows arrive in time
-- order, so a BRIN index (a few pages, next to nothing to maintain on insert)
-- finds them without scanning the whole table.
CREATE INDEX visit_counts_hour_brin ON visit_counts USING brin (hour);
CREATE INDEX daily_visitors_day_brin ON daily_visitors USING brin (day);
