-- Second factors: TOTP, recovery codes, the login challenge between the
-- password and the factor, and how each session was authenticated (step-up).

-- One TOTP factor per user. The secret is stored encrypted (AES-256-GCM, key
-- derived from JWT_SECRET). Until confirmed_at is set the enrolment is pending
-- and the factor is not asked for at login. last_used_step refuses a replayed code.
CREATE TABLE totp_factors (
  user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  secret_sealed bytea NOT NULL,
  created_at timestamptz NOT NULL,
  confirmed_at timestamptz,
  last_used_step bigint NOT NULL DEFAULT -1
);

-- Single-use recovery codes, stored as SHA-256 only. A new set replaces the old.
CREATE TABLE recovery_codes (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  code_hash bytea NOT NULL CHECK (octet_length(code_hash) = 32),
  created_at timestamptz NOT NULL,
  used_at timestamptz,
  PRIMARY KEY (user_id, code_hash)
);

-- Handed out by a login whose password was right for a user with a factor;
-- only the factor check accepts it. Stored as SHA-256; attempts are counted
-- before each check.
CREATE TABLE login_challenges (
  token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  used_at timestamptz
);
CREATE INDEX login_challenges_expires_at_idx ON login_challenges (expires_at);

-- When and how the session's user last proved who they are (at login): the
-- access tokens of the session carry it (auth_time, amr), and sensitive
-- operations ask for a recent one. NULL (sessions made before): created_at, password.
ALTER TABLE sessions ADD COLUMN authenticated_at timestamptz;
ALTER TABLE sessions ADD COLUMN amr text[];
