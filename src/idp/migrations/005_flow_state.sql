-- GoTrue's PKCE flow state (supabase-js flowType 'pkce'): a mail requested with a code challenge
-- leaves one row; following the mail's link sets its auth code (kept as a SHA-256 digest only), and
-- POST /token?grant_type=pkce exchanges that code with the verifier once, deleting the row.
CREATE TABLE IF NOT EXISTS auth.flow_state (
  id uuid PRIMARY KEY,
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  code_challenge text NOT NULL,
  code_challenge_method text NOT NULL CHECK (code_challenge_method IN ('s256', 'plain')),
  authentication_method text NOT NULL,
  auth_code_hash text UNIQUE,
  created_at timestamptz NOT NULL,
  auth_code_issued_at timestamptz
);
CREATE INDEX IF NOT EXISTS flow_state_user_idx ON auth.flow_state (user_id, authentication_method, created_at);
REVOKE ALL ON auth.flow_state FROM anon, authenticated, service_role;
