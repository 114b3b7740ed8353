-- One row per short link. The primary key on code is what guarantees
-- uniqueness: creation retries on its violation instead of checking first.
-- COLLATE "C": codes are compared byte for byte (case matters), and the
-- index is cheaper than with a linguistic collation.
CREATE TABLE links (
  code text COLLATE "C" PRIMARY KEY CHECK (code ~ '^[0-9a-zA-Z]{7}$'),
  original_url text NOT NULL CHECK (char_length(original_url) BETWEEN 1 AND 2048),
  clicks bigint NOT NULL DEFAULT 0 CHECK (clicks >= 0),
  created_at timestamptz NOT NULL DEFAULT now()
);
