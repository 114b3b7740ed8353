-- GoTrue's reauthentication (GET /reauthenticate): a six-digit nonce mailed to the signed-in user,
-- which a password change from a session older than a day must carry. One more kind of one-time
-- token, and the column that records when its mail was sent, as GoTrue's auth.users has.
ALTER TABLE auth.users ADD COLUMN IF NOT EXISTS reauthentication_sent_at timestamptz;

ALTER TABLE auth.one_time_tokens DROP CONSTRAINT one_time_tokens_token_type_check;
ALTER TABLE auth.one_time_tokens ADD CONSTRAINT one_time_tokens_token_type_check CHECK (
  token_type IN ('confirmation_token', 'recovery_token', 'email_change_token_current', 'email_change_token_new', 'reauthentication_token')
);
