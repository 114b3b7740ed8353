-- A mailed token is used two ways: its link carries a random token (`token_hash` keeps the
-- SHA-256 of it), and its six-digit code, typed with the address, is checked against `code_hash`
-- (the SHA-256 of GoTrue's SHA-224(address + code)). Separate, so that guessing codes is bounded
-- per token and per account, and the link cannot be found by trying the million codes' hashes.
-- Tokens issued before have one value for both.
ALTER TABLE auth.one_time_tokens ADD COLUMN code_hash text;
UPDATE auth.one_time_tokens SET code_hash = token_hash;
ALTER TABLE auth.one_time_tokens ALTER COLUMN code_hash SET NOT NULL;
CREATE INDEX one_time_tokens_relates_to_idx ON auth.one_time_tokens (relates_to);
