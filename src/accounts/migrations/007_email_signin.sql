-- Sign-in by mail (EMAIL_SIGNIN): a link token and a 6-digit code in one mail.

-- The code is stored as an HMAC (key derived from JWT_SECRET) over the token's hash
-- and the code: a copy of the table alone cannot be tried against a million codes.
-- attempts counts wrong codes; at EMAIL_SIGNIN_MAX_ATTEMPTS the token is void.
ALTER TABLE email_tokens DROP CONSTRAINT email_tokens_purpose_check;
ALTER TABLE email_tokens ADD CONSTRAINT email_tokens_purpose_check
  CHECK (purpose IN ('password_reset', 'email_verification', 'email_signin'));
ALTER TABLE email_tokens ADD COLUMN code_hash bytea;
ALTER TABLE email_tokens ADD COLUMN attempts integer NOT NULL DEFAULT 0;

-- The RFC 8176 method of the first step of a login waiting for its second factor:
-- pwd (password) or otp (a code or link sent by mail); the session's amr starts with it.
ALTER TABLE login_challenges ADD COLUMN first_method text NOT NULL DEFAULT 'pwd' CHECK (first_method IN ('pwd', 'otp'));
