import { isCommonPassword } from '../kit/common-passwords.js';
import { badRequest, type HttpError } from '../kit/http/errors.js';
import { hasLoneSurrogate } from '../kit/text.js';

// Rules a JSON schema cannot express (lengths after trimming, counted in code
// points; byte length in UTF-8), shared by registration, login and the admin
// seed so a password accepted in one place is accepted in all of them.

export const NAME_LENGTH = { min: 2, max: 60 } as const;
export const PASSWORD_LENGTH = { min: 8, max: 72 } as const;
/** bcrypt reads only the first 72 bytes: a longer password would be silently truncated. */
export const PASSWORD_MAX_BYTES = 72;
export const EMAIL_MAX_LENGTH = 254;

// The WHATWG "valid e-mail address" grammar (what browsers accept), ASCII only.
const EMAIL_PATTERN = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;

// Control characters (U+0000 to U+001F, U+007F to U+009F) have no place in a
// display name, and PostgreSQL text cannot hold U+0000 at all: such a name made
// the insert fail with a 500 instead of a 400.
const CONTROL_CHARACTER = /\p{Cc}/u;

/** Length in characters (code points), not UTF-16 units: "😀" is one character. */
export function characterCount(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

/** Emails are compared and stored trimmed and lowercased. */
export function normalizeEmail(raw: string): string {
  return raw.trim().toLowerCase();
}

export function normalizeName(raw: string): string {
  return raw.trim();
}

/** Each `…Problem` returns what is wrong with an already normalized value, or undefined. */
export function nameProblem(name: string): string | undefined {
  if (hasLoneSurrogate(name)) return 'must be valid Unicode text';
  if (CONTROL_CHARACTER.test(name)) return 'must not contain control characters';
  const length = characterCount(name);
  if (length < NAME_LENGTH.min || length > NAME_LENGTH.max) {
    return `must be between ${NAME_LENGTH.min} and ${NAME_LENGTH.max} characters`;
  }
  return undefined;
}

export function emailProblem(email: string): string | undefined {
  const at = email.lastIndexOf('@');
  if (email.length > EMAIL_MAX_LENGTH || at < 1 || at > 64 || !EMAIL_PATTERN.test(email)) {
    return 'must be a valid email address';
  }
  return undefined;
}

/** Passwords are never trimmed nor otherwise altered. */
export function passwordProblem(password: string): string | undefined {
  // A lone surrogate reaches bcrypt as U+FFFD, so two different passwords would share one hash.
  if (hasLoneSurrogate(password)) return 'must be valid Unicode text';
  const length = characterCount(password);
  if (length < PASSWORD_LENGTH.min || length > PASSWORD_LENGTH.max) {
    return `must be between ${PASSWORD_LENGTH.min} and ${PASSWORD_LENGTH.max} characters`;
  }
  if (Buffer.byteLength(password, 'utf8') > PASSWORD_MAX_BYTES) {
    return `must be at most ${PASSWORD_MAX_BYTES} bytes in UTF-8`;
  }
  return undefined;
}

/**
 * A password being chosen (registration, change, reset) also must not be one of
 * the most commonly used ones (NIST SP 800-63B, 5.1.1.2). Login and the
 * current password are checked with passwordProblem alone: an account whose
 * password predates the list can still sign in and change it.
 */
export function newPasswordProblem(password: string): string | undefined {
  const problem = passwordProblem(password);
  if (problem) return problem;
  if (isCommonPassword(password)) return COMMON_PASSWORD_PROBLEM;
  return undefined;
}

export const COMMON_PASSWORD_PROBLEM = 'is one of the most commonly used passwords: choose one that is harder to guess';

/** The same 400 and message style as a schema failure (`body/password must …`). */
export function invalidField(field: string, problem: string): HttpError {
  return badRequest(`body/${field} ${problem}`);
}

export interface Registration {
  name: string;
  email: string;
  password: string;
}

export interface Credentials {
  email: string;
  password: string;
}

/**
 * Normalizes and checks a registration. Every problem is in the one 400, in
 * field order and separated by "; " (`body/name must …; body/password is …`),
 * so a form can mark every field at once.
 */
export function checkRegistration(body: Registration): Registration {
  const name = normalizeName(body.name);
  const email = normalizeEmail(body.email);
  const problems: Array<[string, string | undefined]> = [
    ['name', nameProblem(name)],
    ['email', emailProblem(email)],
    ['password', newPasswordProblem(body.password)],
  ];
  const found = problems.filter(([, problem]) => problem !== undefined);
  if (found.length > 0) throw badRequest(found.map(([field, problem]) => `body/${field} ${problem}`).join('; '));
  return { name, email, password: body.password };
}

/**
 * Login input gets the same rules as registration: a password no account can
 * have (too long, over 72 bytes) is refused before bcrypt could truncate it.
 */
export function checkCredentials(body: Credentials): Credentials {
  const email = normalizeEmail(body.email);
  const emailIssue = emailProblem(email);
  if (emailIssue) throw invalidField('email', emailIssue);
  const passwordIssue = passwordProblem(body.password);
  if (passwordIssue) throw invalidField('password', passwordIssue);
  return { email, password: body.password };
}
