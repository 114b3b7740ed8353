import { createHmac } from 'node:crypto';
import { HttpError } from '../kit/http/errors.js';
import { DEFAULT_LOGIN_FAILURE_LIMITS, type LoginRefusal } from '../kit/login-throttle.js';
import type { CounterStore } from '../kit/rate-limit.js';

/** Failed logins allowed per window (docs/accounts.md, "Brute-force protection"); successes are never counted. */
export const LOGIN_FAILURE_LIMITS = DEFAULT_LOGIN_FAILURE_LIMITS;

/**
 * How an email appears in the audit log, the logs and the counter keys: never in clear, and not
 * as a plain SHA-256 either (a dictionary of addresses would read it back), but as an HMAC-SHA256
 * under a key derived from JWT_SECRET. The same address always gives the same digest while
 * JWT_SECRET stays the same.
 */
export function emailDigester(jwtSecret: string): (email: string) => string {
  const key = createHmac('sha256', jwtSecret).update('accounts email digest').digest();
  return (email) => createHmac('sha256', key).update(email).digest('hex');
}

export function tooManyFailures(seconds: number): HttpError {
  return new HttpError(429, `Too many failed login attempts, try again in ${seconds} seconds.`, {
    'retry-after': String(seconds),
  });
}

/**
 * Tells the first refusal of a throttle window from the others, across instances: only that one
 * is written to the audit log and the log, so a flood of refused logins adds one row per
 * refusing key and window instead of one per refusal (each refusal is still counted in
 * rate_limited_requests_total).
 */
export class RefusalRecorder {
  constructor(private readonly store: CounterStore) {}

  async isFirstOfWindow(refusal: LoginRefusal): Promise<boolean> {
    // The marker lives as long as the refusing window has left.
    const state = await this.store.hit(`refused:${refusal.key}`, refusal.retryAfterSeconds * 1000);
    return state.count === 1;
  }
}
