-- A link's lifecycle: it may expire, stop after a number of visits, or be
-- disabled by an admin. A link in any of these states answers 410 and counts
-- nothing; clicks never exceed max_visits.
ALTER TABLE links
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN max_visits bigint CHECK (max_visits >= 1),
  ADD COLUMN disabled boolean NOT NULL DEFAULT false;
