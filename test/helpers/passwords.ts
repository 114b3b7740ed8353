// bcrypt in tests: the services' own hasher (the same library, worker threads and queues) at cost 4
// instead of 12 (accounts) or 10 (the idp), so the thousands of registrations and sign-ins of the
// suites take a fraction of the CPU. Tests of the hashing itself (the stored cost, the time an
// unknown email takes, the bounded queues) hand the service its production hasher instead:
// accounts-register, accounts-login, accounts-overload, accounts-bruteforce, idp-passwords.
import { PasswordHasher } from '../../src/kit/password-hasher.js';

export const TEST_BCRYPT_COST = 4;

let shared: PasswordHasher | undefined;

/** One hasher per test process; its idle workers never hold the process open. */
export function testPasswordHasher(): PasswordHasher {
  shared ??= new PasswordHasher({ cost: TEST_BCRYPT_COST, maxQueued: 1000 });
  return shared;
}
