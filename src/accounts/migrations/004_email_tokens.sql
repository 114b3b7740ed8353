-- Password reset and email verification.

-- When the owner of the address proved it (followed a verification or reset
-- link); NULL: not yet. Accounts made before this column are unverified.
ALTER TABLE users ADD COLUMN email_verified_at timestamptz;

-- Single-use tokens sent by mail. Only the SHA-256 of a token is stored, so a
-- copy of the table cannot be used to take over accounts.
CREATE TABLE email_tokens (
  token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
  purpose text NOT NULL CHECK (purpose IN ('password_reset', 'email_verification')),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);

-- A completed reset retires the user's other reset links.
CREATE INDEX email_tokens_user_idx ON email_tokens (user_id, purpose) WHERE used_at IS NULL;
