import { randomBytes } from 'node:crypto';

/**
 * An address no other test, nor an earlier run sharing the database or Redis, uses:
 * `<label>-<12 random hex digits>@example.com`.
 */
export function uniqueEmail(label = 'user'): string {
  return `${label}-${randomBytes(6).toString('hex')}@example.com`;
}
