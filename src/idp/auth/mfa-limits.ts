import type { Clock } from '../../kit/clock.js';
import type { Ipv6Prefixes } from '../../kit/http/client-ip.js';
import { type CounterStore, FixedWindowLimiter } from '../../kit/rate-limit.js';
import { countRequestFrom } from './rate-limits.js';

// Guessing a six-digit TOTP code. GoTrue limits challenge and verify requests per client address,
// which alone does not bound a guesser with many addresses (or many challenges: anyone holding the
// password's session may ask for more). So each code tried is also counted, in the shared counters
// (Redis when configured), per challenge (voided at its last failure), per factor and per user over
// an hour, and compared only when all three still allow it. Every attempt is counted before its
// code is compared, so concurrent guesses cannot slip past a limit.

export interface MfaLimitSettings {
  /** Challenge and verify requests per address per minute (each its own counter). */
  requestsPerAddressPerMinute: number;
  perChallenge: number;
  perFactorPerHour: number;
  perUserPerHour: number;
  /** How long a challenge lives: its counter needs to outlive it, not more. */
  challengeLifetimeSeconds: number;
  ipv6: Ipv6Prefixes;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

export class MfaLimits {
  private readonly challenges: FixedWindowLimiter;
  private readonly verifications: FixedWindowLimiter;
  private readonly perChallenge: FixedWindowLimiter;
  private readonly perFactor: FixedWindowLimiter;
  private readonly perUser: FixedWindowLimiter;
  private readonly ipv6: Ipv6Prefixes;

  constructor(storeFor: (limit: string) => CounterStore, clock: Clock, settings: MfaLimitSettings) {
    const perAddress = settings.requestsPerAddressPerMinute;
    this.challenges = new FixedWindowLimiter(perAddress, MINUTE, storeFor('mfa-challenge'), clock);
    this.verifications = new FixedWindowLimiter(perAddress, MINUTE, storeFor('mfa-verify'), clock);
    this.perChallenge = new FixedWindowLimiter(
      settings.perChallenge,
      settings.challengeLifetimeSeconds * 1000,
      storeFor('mfa-attempts-challenge'),
      clock,
    );
    this.perFactor = new FixedWindowLimiter(settings.perFactorPerHour, HOUR, storeFor('mfa-attempts-factor'), clock);
    this.perUser = new FixedWindowLimiter(settings.perUserPerHour, HOUR, storeFor('mfa-attempts-user'), clock);
    this.ipv6 = settings.ipv6;
  }

  /** One POST /factors/:id/challenge from `ip`; 429 past the minute's. */
  async challengeRequest(ip: string): Promise<void> {
    await countRequestFrom(this.challenges, ip, this.ipv6);
  }

  /** One POST /factors/:id/verify from `ip`; 429 past the minute's. */
  async verifyRequest(ip: string): Promise<void> {
    await countRequestFrom(this.verifications, ip, this.ipv6);
  }

  /**
   * One code about to be compared: counted against the challenge, then (while that allows it)
   * against the factor, then the user, so attempts refused by a spent challenge do not use up the
   * factor's budget. `allowed` only when all three are within budget. `challengeSpent`: no further
   * code may be tried against this challenge (the caller voids it when this one fails too).
   */
  async attempt(ids: { challenge: string; factor: string; user: string }): Promise<{
    allowed: boolean;
    challengeSpent: boolean;
    retryAfterSeconds: number;
  }> {
    const challenge = await this.perChallenge.consume(ids.challenge);
    const challengeSpent = challenge.limited || challenge.remaining === 0;
    if (challenge.limited) return { allowed: false, challengeSpent, retryAfterSeconds: 1 };
    for (const [limiter, key] of [
      [this.perFactor, ids.factor],
      [this.perUser, ids.user],
    ] as const) {
      const decision = await limiter.consume(key);
      if (decision.limited) return { allowed: false, challengeSpent, retryAfterSeconds: Math.max(decision.retryAfterSeconds, 1) };
    }
    return { allowed: true, challengeSpent, retryAfterSeconds: 0 };
  }

  /** A verified code: the factor's and the user's failures are forgiven, as a sign-in's are. */
  async succeeded(ids: { factor: string; user: string }): Promise<void> {
    await Promise.all([this.perFactor.reset(ids.factor), this.perUser.reset(ids.user)]);
  }
}
