import type { Clock } from '../../kit/clock.js';
import { type CounterStore, FixedWindowLimiter } from '../../kit/rate-limit.js';
import { accountKey, refuseOverRequestRate } from './rate-limits.js';

// Guessing a mailed six-digit code. The per-address /verify limit alone does not bound it: an
// attacker with many addresses tries codes for one account in parallel. So every code typed for an
// account is counted twice, in the shared counters (Redis when configured, so all instances agree):
// per token, which is voided after `perToken` attempts, and per account, which is refused for the
// rest of the hour after `perAccountPerHour` attempts across the tokens mailed to it meanwhile.
// Each attempt is counted before its code is compared, so concurrent guesses cannot slip past.

export interface OtpLimitSettings {
  /** Codes tried against one mailed token before it is voided. */
  perToken: number;
  /** Codes tried for one address per hour, across tokens. */
  perAccountPerHour: number;
  /** How long a token lives: its counter needs to outlive it, not more. */
  tokenLifetimeSeconds: number;
}

const HOUR = 60 * 60_000;

export class OtpLimits {
  private readonly perToken: FixedWindowLimiter;
  private readonly perAccount: FixedWindowLimiter;

  constructor(storeFor: (limit: string) => CounterStore, clock: Clock, settings: OtpLimitSettings) {
    this.perToken = new FixedWindowLimiter(settings.perToken, settings.tokenLifetimeSeconds * 1000, storeFor('otp-token'), clock);
    this.perAccount = new FixedWindowLimiter(settings.perAccountPerHour, HOUR, storeFor('otp-account'), clock);
  }

  /** One code typed for `email`; throws 429 over_request_rate_limit past the hour's attempts. */
  async accountAttempt(email: string): Promise<void> {
    refuseOverRequestRate(await this.perAccount.consume(accountKey(email)));
  }

  /**
   * One code tried against the token known by `tokenKey` (unique per issued token). Returns whether
   * it may still be compared, and whether this was the last attempt the token allows.
   */
  async tokenAttempt(tokenKey: string): Promise<{ allowed: boolean; last: boolean }> {
    const decision = await this.perToken.consume(tokenKey);
    return { allowed: !decision.limited, last: decision.remaining === 0 };
  }
}
