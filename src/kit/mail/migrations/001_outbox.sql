-- Mail waiting to be sent (src/kit/mail), applied by the kit under its own
-- migration scope ("mail") to every service that sends mail (kit/service.ts).
-- IF NOT EXISTS: databases of earlier releases got the same table from a copy
-- of this file among the service's own migrations.
-- A row is written in the transaction that creates what the mail announces (a reset token, a verification), so a rolled-back action never
-- sends one; it is deleted once the SMTP server accepted it, so the link it
-- carries does not outlive its delivery in the database.
CREATE TABLE IF NOT EXISTS mail_outbox (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  recipient text NOT NULL,
  subject text NOT NULL,
  text_body text NOT NULL,
  html_body text,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- Sending attempts started so far; the next one is due at next_attempt_at
  -- (a worker that claims a row moves it a lease ahead, so no other worker
  -- takes it while it is being sent).
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  -- Set when the worker gave up; the bodies are then erased.
  failed_at timestamptz,
  last_error text
);

CREATE INDEX IF NOT EXISTS mail_outbox_due_idx ON mail_outbox (next_attempt_at, id) WHERE failed_at IS NULL;

-- The worker inserts, reads, moves and deletes single rows; nothing else.
REVOKE TRUNCATE, REFERENCES, TRIGGER ON mail_outbox FROM CURRENT_USER;
