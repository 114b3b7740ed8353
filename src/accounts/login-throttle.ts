import { createHash } from 'node:crypto';
import type { Clock } from '../kit/clock.js';
import { HttpError } from '../kit/errors.js';
import type { CounterStore, WindowLimit } from '../kit/rate-limit.js';

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
 * A login attempt that holds one count on its account's and its IP's
 * counters while its password is checked. Left as it is, the count is the
 * failure; it is given back when the password matched or when no answer
 * came out of the check.
 */
export class LoginAttempt {
  constructor(
    private readonly store: CounterStore,
    private readonly limits: [WindowLimit, WindowLimit],
    private readonly windowIds: string[],
  ) {}

  /** A success clears the account's failures; the IP's stay, so one good account cannot launder a spray. */
  async succeeded(): Promise<void> {
    const [account, ip] = this.limits;
    await Promise.all([this.store.reset(account.key), this.store.release(ip.key, this.windowIds[1]!, ip.windowMs)]);
  }

  /** The check never answered (hashing queue full, database down): the guess was not spent. */
  async abandoned(): Promise<void> {
    await Promise.all(this.limits.map((limit, i) => this.store.release(limit.key, this.windowIds[i]!, limit.windowMs)));
  }
}

/**
 * Brute-force guard: failures are counted per account (guessing one password)
 * and per client IP (spraying many accounts). Every attempt takes its count
 * BEFORE its password is verified, atomically on both counters (one Lua
 * script with Redis), so however many guesses arrive at once, at most the
 * limit's worth reach bcrypt per window; the rest are refused without any
 * bcrypt work.
 */
export class LoginThrottle {
  constructor(
    private readonly store: CounterStore,
    private readonly clock: Clock,
  ) {}

  /** The attempt, holding its counts, or the seconds until one is allowed. */
  async reserve(email: string, ip: string): Promise<LoginAttempt | { retryAfterSeconds: number }> {
    const keys = loginFailureKeys(email, ip);
    const limits: [WindowLimit, WindowLimit] = [
      { key: keys.account, ...LOGIN_FAILURE_LIMITS.perAccount },
      { key: keys.ip, ...LOGIN_FAILURE_LIMITS.perIp },
    ];
    const reservation = await this.store.reserve(limits);
    if (reservation.admitted) return new LoginAttempt(this.store, limits, reservation.windowIds);
    const now = this.clock();
    const blocking = reservation.windows.filter((w, i) => w.count >= limits[i]!.max);
    return { retryAfterSeconds: Math.max(1, ...blocking.map((w) => Math.ceil((w.resetAt - now) / 1000))) };
  }
}
