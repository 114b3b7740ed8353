-- The tokens behind the idp's mails (sign-up confirmation, invitation, password recovery, magic
-- link, email change): one live token per user and kind, as GoTrue's auth.one_time_tokens. `token_hash` is the
-- SHA-256 (hex) of GoTrue's token hash (the link's token, itself derived from the address and the
-- emailed code), so neither a link nor a code can be read back from the table or a backup. A token
-- is used by deleting its row, which only one of several concurrent verifications can do.
-- An email change waits in email_change until confirmed; with secure email change both addresses
-- confirm, email_change_confirm_status counting the confirmations so far (GoTrue's columns).
ALTER TABLE auth.users
  ADD COLUMN recovery_sent_at timestamptz,
  ADD COLUMN invited_at timestamptz,
  ADD COLUMN email_change varchar(255),
  ADD COLUMN email_change_sent_at timestamptz,
  ADD COLUMN email_change_confirm_status smallint NOT NULL DEFAULT 0;

CREATE TABLE auth.one_time_tokens (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  user_id uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  token_type text NOT NULL CHECK (token_type IN ('confirmation_token', 'recovery_token', 'email_change_token_current', 'email_change_token_new')),
  token_hash text NOT NULL,
  relates_to text NOT NULL,
  created_at timestamptz NOT NULL,
  CONSTRAINT one_time_tokens_user_id_token_type_key UNIQUE (user_id, token_type)
);

CREATE INDEX one_time_tokens_token_hash_idx ON auth.one_time_tokens (token_hash);

REVOKE ALL ON auth.one_time_tokens FROM anon, authenticated, service_role;
