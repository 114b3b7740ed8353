-- The idp's own schema: the subset of Supabase's roles, `auth` schema and auth helper functions that
-- app migrations (supabase/migrations/*) reference. Run once per database, in one transaction, by the
-- idp's migration runner, which records applied files itself.

-- Roles are cluster-wide, while this file runs once per database; several databases on one cluster
-- (possibly at the same time) must each succeed. So create each role only if absent, and treat losing
-- a creation race to another transaction as success. The login role that switches into these roles
-- is created elsewhere.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'anon') THEN
    BEGIN
      CREATE ROLE anon NOLOGIN INHERIT;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;
    END;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'authenticated') THEN
    BEGIN
      CREATE ROLE authenticated NOLOGIN INHERIT;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;
    END;
  END IF;
  -- BYPASSRLS: the secret key acts as an administrator that row-level security does not restrict.
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'service_role') THEN
    BEGIN
      CREATE ROLE service_role NOLOGIN INHERIT BYPASSRLS;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;
    END;
  END IF;
END
$$;

CREATE SCHEMA auth;

CREATE TABLE auth.users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  aud varchar(255) DEFAULT 'authenticated',
  role varchar(255) DEFAULT 'authenticated',
  email varchar(255),
  encrypted_password varchar(255),
  email_confirmed_at timestamptz,
  confirmation_sent_at timestamptz,
  last_sign_in_at timestamptz,
  raw_app_meta_data jsonb NOT NULL DEFAULT '{}',
  raw_user_meta_data jsonb NOT NULL DEFAULT '{}',
  banned_until timestamptz,
  deleted_at timestamptz,
  is_sso_user boolean NOT NULL DEFAULT false,
  is_anonymous boolean NOT NULL DEFAULT false,
  phone text,
  phone_confirmed_at timestamptz,
  confirmed_at timestamptz GENERATED ALWAYS AS (least(email_confirmed_at, phone_confirmed_at)) STORED,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Email addresses are unique regardless of case. SSO users are exempt, as in Supabase, because the
-- same address may legitimately arrive from several identity providers.
CREATE UNIQUE INDEX users_email_partial_key ON auth.users (lower(email)) WHERE is_sso_user = false;

CREATE TABLE auth.identities (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  provider_id text NOT NULL,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  identity_data jsonb NOT NULL,
  provider text NOT NULL,
  last_sign_in_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  email text GENERATED ALWAYS AS (lower(identity_data ->> 'email')) STORED,
  CONSTRAINT identities_provider_id_provider_unique UNIQUE (provider_id, provider)
);

-- Foreign keys are not indexed automatically; deleting a user cascades through these.
CREATE INDEX identities_user_id_idx ON auth.identities (user_id);

CREATE TABLE auth.sessions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  not_after timestamptz,
  aal text NOT NULL DEFAULT 'aal1'
);

CREATE INDEX sessions_user_id_idx ON auth.sessions (user_id);

-- `token` holds the SHA-256 hex digest of the refresh token, never the token itself, so a leaked
-- table (or backup) cannot be replayed. `parent` is the digest of the token this one replaced, for
-- rotation and reuse detection.
CREATE TABLE auth.refresh_tokens (
  id bigserial PRIMARY KEY,
  token varchar(255) NOT NULL UNIQUE,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  session_id uuid NOT NULL REFERENCES auth.sessions (id) ON DELETE CASCADE,
  parent varchar(255),
  revoked boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX refresh_tokens_session_id_idx ON auth.refresh_tokens (session_id);
CREATE INDEX refresh_tokens_parent_idx ON auth.refresh_tokens (parent);
CREATE INDEX refresh_tokens_user_id_idx ON auth.refresh_tokens (user_id);

-- The helper functions exactly as Supabase defines them (supabase/auth
-- 20220224000811_update_auth_functions, 20220531120530_add_auth_jwt_function), so policies written
-- against hosted Supabase behave the same here. `request.jwt.claim.*` is what older PostgREST set;
-- `request.jwt.claims` is what is set per transaction now. A transaction-local set_config leaves the
-- setting as '' (not NULL) afterwards, hence nullif.
CREATE OR REPLACE FUNCTION auth.uid() RETURNS uuid
LANGUAGE sql STABLE
AS $$
  select
  coalesce(
    nullif(current_setting('request.jwt.claim.sub', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
  )::uuid
$$;

CREATE OR REPLACE FUNCTION auth.role() RETURNS text
LANGUAGE sql STABLE
AS $$
  select
  coalesce(
    nullif(current_setting('request.jwt.claim.role', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
  )::text
$$;

CREATE OR REPLACE FUNCTION auth.email() RETURNS text
LANGUAGE sql STABLE
AS $$
  select
  coalesce(
    nullif(current_setting('request.jwt.claim.email', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'email')
  )::text
$$;

CREATE OR REPLACE FUNCTION auth.jwt() RETURNS jsonb
LANGUAGE sql STABLE
AS $$
  select
    coalesce(
        nullif(current_setting('request.jwt.claim', true), ''),
        nullif(current_setting('request.jwt.claims', true), '')
    )::jsonb
$$;

-- The API roles may resolve names in both schemas (auth.uid() in policies and defaults, FKs to
-- auth.users) but get no privileges on the auth tables themselves: only the idp, connected as the
-- owner, reads and writes users, sessions and tokens. No default privileges are set anywhere, so an
-- app table without explicit GRANTs fails with 42501 exactly as on a newly created hosted project.
GRANT USAGE ON SCHEMA auth TO anon, authenticated, service_role;
GRANT USAGE ON SCHEMA public TO anon, authenticated, service_role;
GRANT EXECUTE ON FUNCTION auth.uid(), auth.role(), auth.email(), auth.jwt()
  TO anon, authenticated, service_role;
REVOKE ALL ON ALL TABLES IN SCHEMA auth FROM anon, authenticated, service_role;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA auth FROM anon, authenticated, service_role;
