-- Passkeys (WebAuthn credentials), their single-use challenges, and the devices
-- each account has signed in from (the new-device mail).

-- One row per registered passkey. credential_id is the authenticator's id
-- (base64url, as browsers send it), unique across accounts: a sign-in with a
-- discoverable credential finds its account by it. public_key is the COSE key;
-- counter the authenticator's last signature count (0: it keeps none).
CREATE TABLE passkeys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  credential_id text NOT NULL UNIQUE CHECK (char_length(credential_id) BETWEEN 1 AND 1366),
  public_key bytea NOT NULL,
  counter bigint NOT NULL DEFAULT 0 CHECK (counter >= 0),
  transports text[] NOT NULL DEFAULT '{}',
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 64),
  created_at timestamptz NOT NULL,
  last_used_at timestamptz
);
CREATE INDEX passkeys_user_id_idx ON passkeys (user_id, created_at);

-- The challenges of a passkey registration (bound to its user) and of a sign-in
-- with a passkey alone (bound to nobody yet). Stored as SHA-256 of the challenge
-- the browser signs; single use (used_at), short-lived (expires_at).
CREATE TABLE passkey_challenges (
  challenge_hash bytea PRIMARY KEY CHECK (octet_length(challenge_hash) = 32),
  purpose text NOT NULL CHECK (purpose IN ('registration', 'sign_in')),
  user_id uuid REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  CHECK ((purpose = 'registration') = (user_id IS NOT NULL))
);
CREATE INDEX passkey_challenges_expires_at_idx ON passkey_challenges (expires_at);

-- A password (or mail) sign-in waiting for its second factor may be answered with a
-- passkey: the SHA-256 of the WebAuthn challenge handed out with it.
ALTER TABLE login_challenges ADD COLUMN passkey_challenge_hash bytea CHECK (octet_length(passkey_challenge_hash) = 32);

-- The devices (docs/accounts.md, "New-device sign-in mail") each account has signed
-- in from: a sign-in from one not listed here is mailed to the user.
CREATE TABLE known_devices (
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  device text NOT NULL CHECK (char_length(device) BETWEEN 1 AND 512),
  first_seen_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL,
  PRIMARY KEY (user_id, device)
);
