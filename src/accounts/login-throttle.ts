import { createHash } from 'node:crypto';
import type { Clock } from '../kit/clock.js';
import { HttpError } from '../kit/errors.js';
import { type CounterStore, FixedWindowLimiter } from '../kit/rate-limit.js';

/** Failed logins allowed per window; successes are never counted. */
export const LOGIN_FAILURE_LIMITS = {
  perAccount: { max: 10, windowMs: 15 * 60_000 },
  perIp: { max: 100, windowMs: 15 * 60_000 },
} as const;

/** How an email appears in logs and counter keys: never in clear. */
export function emailDigest(email: string): string {
  return createHash('sha256').update(email).digest('hex');
}

/** The counter keys of a login attempt (exported so tests can pre-fill a store). */
export const loginFailureKeys = (email: string, ip: string) => ({
  account: `account:${emailDigest(email)}`,
  ip: `ip:${ip}`,
});

export function tooManyFailures(seconds: number): HttpError {
  return new HttpError(429, `Too many failed login attempts, try again in ${seconds} seconds.`, {
    'retry-after': String(seconds),
  });
}

/**
 * Brute-force guard: failures are counted per account (guessing one password)
 * and per client IP (spraying many accounts). Checked before the password is
 * verified, so a locked-out guess costs no bcrypt work.
 */
export class LoginThrottle {
  private readonly perAccount: FixedWindowLimiter;
  private readonly perIp: FixedWindowLimiter;

  constructor(store: CounterStore, clock: Clock) {
    const { perAccount, perIp } = LOGIN_FAILURE_LIMITS;
    this.perAccount = new FixedWindowLimiter(perAccount.max, perAccount.windowMs, store, clock);
    this.perIp = new FixedWindowLimiter(perIp.max, perIp.windowMs, store, clock);
  }

  /** Seconds until an attempt is allowed when either counter is at its maximum, else undefined. */
  async blockedFor(email: string, ip: string): Promise<number | undefined> {
    const keys = loginFailureKeys(email, ip);
    const [account, address] = await Promise.all([this.perAccount.check(keys.account), this.perIp.check(keys.ip)]);
    const blocking = [account, address].filter((d) => d.limited);
    return blocking.length > 0 ? Math.max(1, ...blocking.map((d) => d.retryAfterSeconds)) : undefined;
  }

  async recordFailure(email: string, ip: string): Promise<void> {
    const keys = loginFailureKeys(email, ip);
    await Promise.all([this.perAccount.consume(keys.account), this.perIp.consume(keys.ip)]);
  }

  /** A success clears the account's failures; the IP's stay, so one good account cannot launder a spray. */
  async recordSuccess(email: string): Promise<void> {
    await this.perAccount.reset(loginFailureKeys(email, '').account);
  }
}
