import { randomBytes } from 'node:crypto';
import { isCommonPassword } from '../../kit/common-passwords.js';
import { PasswordHasher, PasswordHasherBusy, type PasswordHasherOptions } from '../../kit/password-hasher.js';
import { authErrors } from './errors.js';

// GoTrue's defaults: bcrypt cost 10, minimum length 6, and bcrypt's own 72-byte input limit turned
// into an explicit error rather than a silent truncation.
export const BCRYPT_COST = 10;
export const MIN_PASSWORD_LENGTH = 6;
const MAX_PASSWORD_BYTES = 72;

/**
 * The idp's hasher: the kit's low-priority worker threads, so bcrypt stays off the libuv pool that
 * the database's SCRAM logins need (a sign-in storm there made new connections time out).
 */
export function idpPasswordHasher(opts: Omit<PasswordHasherOptions, 'cost'> = {}): PasswordHasher {
  return new PasswordHasher({ cost: BCRYPT_COST, ...opts });
}

/** A full hashing queue is a 503 in GoTrue's error shape, with Retry-After. */
async function orOverloaded<T>(job: () => Promise<T>): Promise<T> {
  try {
    return await job();
  } catch (err) {
    if (err instanceof PasswordHasherBusy) throw authErrors.overloaded(err.retryAfterSeconds);
    throw err;
  }
}

/**
 * Hashes new passwords, and compares against the stored hash, or against a hash of a random
 * password when there is none, so an unknown email costs the same time as a wrong password.
 */
export class Passwords {
  private constructor(
    private readonly hasher: PasswordHasher,
    private readonly dummyHash: string,
  ) {}

  static async create(hasher: PasswordHasher): Promise<Passwords> {
    return new Passwords(hasher, await hasher.hash(randomBytes(18).toString('base64url')));
  }

  hash(password: string): Promise<string> {
    return orOverloaded(() => this.hasher.hash(password));
  }

  async verify(password: string, hash: string | null | undefined): Promise<boolean> {
    const tooLong = Buffer.byteLength(password) > MAX_PASSWORD_BYTES;
    const matches = await orOverloaded(() => this.hasher.verify(password, hash ?? this.dummyHash));
    return matches && !tooLong && hash !== null && hash !== undefined;
  }
}

export function checkPasswordTooLong(password: string): void {
  const bytes = Buffer.byteLength(password);
  if (bytes <= MAX_PASSWORD_BYTES) return;
  // GoTrue's text counts bytes but says characters; for a password of at most 72 characters that
  // is only too long in bytes (accents, emoji), say what is actually wrong.
  if ([...password].length <= MAX_PASSWORD_BYTES) {
    throw authErrors.validation(`Password cannot be longer than ${MAX_PASSWORD_BYTES} bytes (this one is ${bytes} bytes in UTF-8)`);
  }
  throw authErrors.validation(`Password cannot be longer than ${MAX_PASSWORD_BYTES} characters`);
}

/** The strength problem of a password under the current policy, or null. */
export function passwordWeakness(password: string): { message: string; reasons: string[] } | null {
  // Counted in bytes of UTF-8, as GoTrue's checkPasswordStrength does (Go's len of a string), even
  // though its message says characters: "ééé" (6 bytes) passes, "abcde" does not.
  if (Buffer.byteLength(password) < MIN_PASSWORD_LENGTH) {
    return { message: `Password should be at least ${MIN_PASSWORD_LENGTH} characters.`, reasons: ['length'] };
  }
  // NIST SP 800-63B: no password from a list of commonly used ones. GoTrue's answer when its breached
  // password check (HaveIBeenPwned) finds one, checked as there after the length.
  if (isCommonPassword(password)) {
    return { message: 'Password is known to be weak and easy to guess, please choose a different one.', reasons: ['pwned'] };
  }
  return null;
}

/** A password nobody knows, for admin-created users without one (GoTrue: 64 random characters). */
export function randomPassword(): string {
  return randomBytes(48).toString('base64url');
}
