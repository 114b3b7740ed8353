import { randomBytes } from 'node:crypto';
import { PasswordHasher, type PasswordHasherOptions } from '../kit/password-hasher.js';

export const BCRYPT_COST = 12;

/** The accounts hasher: cost 12, one low-priority worker per core, queues bounded by BCRYPT_QUEUE_MAX. */
export function accountsPasswordHasher(opts: Omit<PasswordHasherOptions, 'cost'> = {}): PasswordHasher {
  return new PasswordHasher({ cost: BCRYPT_COST, ...opts });
}

const dummyHashes = new Map<number, Promise<string>>();

/**
 * A hash, at the hasher's cost, of a random password nobody knows. Login compares against it
 * when the email is unknown, so an unknown email and a wrong password cost the same bcrypt work
 * and cannot be told apart by timing. Made once per process and cost.
 */
export function dummyPasswordHash(hasher: PasswordHasher): Promise<string> {
  let hash = dummyHashes.get(hasher.cost);
  if (!hash) {
    hash = hasher.hash(randomBytes(32).toString('base64url')).catch((err: unknown) => {
      dummyHashes.delete(hasher.cost);
      throw err;
    });
    dummyHashes.set(hasher.cost, hash);
  }
  return hash;
}
