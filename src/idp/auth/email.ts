import { authErrors } from './errors.js';

// GoTrue's address check (internal/mailer/validate.go): a practical subset of RFC 5322, ASCII only.
const EMAIL =
  /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;
const MAX_EMAIL_LENGTH = 255;

/**
 * The address as stored and compared (lower-cased), or a validation_failed error when it is not
 * one. Not trimmed: GoTrue's validateEmail checks the address as sent, so surrounding spaces are
 * an invalid format there too.
 */
export function parseEmail(raw: string): string {
  const email = raw.toLowerCase();
  if (email.length > MAX_EMAIL_LENGTH) throw authErrors.validation('An email address is too long');
  if (!EMAIL.test(email)) throw authErrors.validation('Unable to validate email address: invalid format');
  return email;
}
