-- Named API keys, issued by the admin: an author key manages the links it
-- created, a manager key every link. Only the key's SHA-256 is kept (the key is
-- 32 random bytes, so a fast digest is enough); revoking keeps the row, so the
-- links it created still name their owner.
CREATE TABLE api_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  role text NOT NULL CHECK (role IN ('author', 'manager')),
  key_hash bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);

-- The key a link was created with (null: an anonymous create, or the admin's).
ALTER TABLE links ADD COLUMN owner_key_id bigint REFERENCES api_keys (id);

-- "My links", newest first, without reading anyone else's.
CREATE INDEX links_owner_created ON links (owner_key_id, created_at DESC, code DESC) WHERE owner_key_id IS NOT NULL;
