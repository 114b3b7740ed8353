-- Links are edited by the people who manage them: a title of their own, and
-- every destination a link had before a change, kept for its stats page.
ALTER TABLE links ADD COLUMN title text CHECK (length(title) <= 200);

CREATE TABLE link_destinations (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  code text COLLATE "C" NOT NULL REFERENCES links (code) ON DELETE CASCADE,
  original_url text NOT NULL,
  replaced_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX link_destinations_code ON link_destinations (code, replaced_at DESC);
