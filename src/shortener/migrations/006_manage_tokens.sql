-- Visit detail belongs to whoever manages a link. A create returns a manage
-- token once; only its SHA-256 digest is kept (the token is 32 random bytes,
-- so a fast digest is enough: there is nothing to guess from a dictionary).
-- Links created before this migration have none: the admin key manages them.
ALTER TABLE links ADD COLUMN manage_token_hash bytea;
