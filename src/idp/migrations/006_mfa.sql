-- GoTrue's multi-factor authentication (TOTP factors), in the shape of its tables: a user's factors,
-- the challenges issued against them, and each session's authentication methods (amr), from which a
-- session's assurance level (aal) follows. The TOTP secret is kept sealed (AES-256-GCM under a key
-- derived from IDP_SECRET_KEY), never in clear; last_totp_step is this idp's own, so a code is
-- accepted once (RFC 6238 section 5.2).
CREATE TABLE auth.mfa_factors (
  id uuid PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  friendly_name text,
  factor_type text NOT NULL CHECK (factor_type IN ('totp')),
  status text NOT NULL CHECK (status IN ('unverified', 'verified')),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  secret text NOT NULL,
  last_challenged_at timestamptz,
  last_totp_step bigint
);
CREATE INDEX mfa_factors_user_id_idx ON auth.mfa_factors (user_id);
CREATE UNIQUE INDEX mfa_factors_user_friendly_name_unique ON auth.mfa_factors (friendly_name, user_id)
  WHERE trim(friendly_name) <> '';

CREATE TABLE auth.mfa_challenges (
  id uuid PRIMARY KEY,
  factor_id uuid NOT NULL REFERENCES auth.mfa_factors (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  verified_at timestamptz,
  ip_address inet NOT NULL
);
CREATE INDEX mfa_challenges_factor_id_idx ON auth.mfa_challenges (factor_id);

CREATE TABLE auth.mfa_amr_claims (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  session_id uuid NOT NULL REFERENCES auth.sessions (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  authentication_method text NOT NULL,
  CONSTRAINT mfa_amr_claims_session_id_authentication_method_pkey UNIQUE (session_id, authentication_method)
);

-- The factor whose verification raised the session to aal2, so removing the factor lowers it again.
ALTER TABLE auth.sessions ADD COLUMN factor_id uuid;
ALTER TABLE auth.sessions ADD CONSTRAINT sessions_aal_check CHECK (aal IN ('aal1', 'aal2', 'aal3'));

-- Sessions started before this file keep the amr their tokens carried.
INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method)
SELECT s.id, s.created_at, s.created_at, CASE WHEN u.is_anonymous THEN 'anonymous' ELSE 'password' END
FROM auth.sessions s JOIN auth.users u ON u.id = s.user_id;

REVOKE ALL ON auth.mfa_factors, auth.mfa_challenges, auth.mfa_amr_claims FROM anon, authenticated, service_role;
