import { randomBytes } from 'node:crypto';
import bcrypt from 'bcrypt';
import { authErrors } from './errors.js';

// GoTrue's defaults: bcrypt cost 10, minimum length 6, and bcrypt's own 72-byte input limit turned
// into an explicit error rather than a silent truncation.
const BCRYPT_COST = 10;
export const MIN_PASSWORD_LENGTH = 6;
const MAX_PASSWORD_BYTES = 72;

export const hashPassword = (password: string): Promise<string> => bcrypt.hash(password, BCRYPT_COST);

/**
 * Compares against the stored hash, or against a hash of a random password when there is none,
 * so an unknown email costs the same time as a wrong password.
 */
export class PasswordVerifier {
  private constructor(private readonly dummyHash: string) {}

  static async create(): Promise<PasswordVerifier> {
    return new PasswordVerifier(await hashPassword(randomBytes(18).toString('base64url')));
  }

  async verify(password: string, hash: string | null | undefined): Promise<boolean> {
    const tooLong = Buffer.byteLength(password) > MAX_PASSWORD_BYTES;
    const matches = await bcrypt.compare(password, hash ?? this.dummyHash);
    return matches && !tooLong && hash !== null && hash !== undefined;
  }
}

export function checkPasswordTooLong(password: string): void {
  if (Buffer.byteLength(password) > MAX_PASSWORD_BYTES) {
    throw authErrors.validation(`Password cannot be longer than ${MAX_PASSWORD_BYTES} characters`);
  }
}

/** The strength problem of a password under the current policy, or null. */
export function passwordWeakness(password: string): { message: string; reasons: string[] } | null {
  // Counted in characters (Go counts runes via utf8.RuneCountInString).
  if ([...password].length < MIN_PASSWORD_LENGTH) {
    return { message: `Password should be at least ${MIN_PASSWORD_LENGTH} characters.`, reasons: ['length'] };
  }
  return null;
}

/** A password nobody knows, for admin-created users without one (GoTrue: 64 random characters). */
export function randomPassword(): string {
  return randomBytes(48).toString('base64url');
}
