-- Sessions with rotating refresh tokens, the per-user access-token cut-off,
-- bans, and the append-only audit log.

-- Access tokens whose iat (whole seconds) is before this are refused: global
-- logout, a password change, a role change or a ban moves it forward. NULL: no cut-off.
ALTER TABLE users ADD COLUMN access_tokens_from timestamptz;
-- Set while the account is banned: no login, no refresh.
ALTER TABLE users ADD COLUMN banned_at timestamptz;

-- A refresh token is stored only as its SHA-256. The previous one is kept
-- (with the time it was replaced) so that several tabs refreshing at once all
-- get the session's current pair instead of signing the user out.
CREATE TABLE sessions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  refresh_token_hash bytea NOT NULL CHECK (octet_length(refresh_token_hash) = 32),
  previous_token_hash bytea CHECK (octet_length(previous_token_hash) = 32),
  rotated_at timestamptz,
  created_at timestamptz NOT NULL,
  last_used_at timestamptz NOT NULL,
  ip text NOT NULL,
  user_agent text,
  ended_at timestamptz,
  end_reason text
);

CREATE UNIQUE INDEX sessions_refresh_token_hash_key ON sessions (refresh_token_hash);
CREATE INDEX sessions_previous_token_hash_idx ON sessions (previous_token_hash) WHERE previous_token_hash IS NOT NULL;
-- The caller's live sessions, newest first; ending all of a user's sessions.
CREATE INDEX sessions_user_live_idx ON sessions (user_id, created_at DESC) WHERE ended_at IS NULL;

-- Who did what to whom, from where. Written in the transaction of the action
-- it records. No foreign keys: the record outlives the accounts it names.
CREATE TABLE audit_log (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL,
  event text NOT NULL,
  actor_id uuid,
  target_id uuid,
  ip text,
  user_agent text,
  details jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX audit_log_actor_idx ON audit_log (actor_id, id) WHERE actor_id IS NOT NULL;
CREATE INDEX audit_log_target_idx ON audit_log (target_id, id) WHERE target_id IS NOT NULL;
CREATE INDEX audit_log_event_idx ON audit_log (event, id);

-- Append-only. The service's role owns its tables (it runs these migrations),
-- so it first gives up its own right to change or remove rows, and a trigger
-- refuses them for any role, a superuser included.
CREATE FUNCTION audit_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_log is append-only' USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_log_no_update_or_delete BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION audit_log_is_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION audit_log_is_append_only();
REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM CURRENT_USER;
