import { badRequest } from '../kit/http/errors.js';
import { IPV6_WIDE_FACTOR, type Ipv6Prefixes, rateLimitKeys } from '../kit/http/client-ip.js';
import type { Clock } from '../kit/clock.js';
import { LoginAttempt } from '../kit/login-throttle.js';
import { PasswordHasher, type PasswordHasherOptions } from '../kit/password-hasher.js';
import type { CounterStore, WindowLimit } from '../kit/rate-limit.js';

// Passwords of protected links. Only a bcrypt hash is stored, made and checked on the kit's
// low-priority worker threads with bounded queues (a full queue is a 503 with Retry-After, never
// an unbounded wait). Guesses are counted BEFORE the hash is compared, atomically on every
// counter (one Lua script with Redis, so the limits hold across instances): however many guesses
// arrive at once, at most the limit's worth reach bcrypt, and the others are refused without any
// hashing. A right password gives its counts back and clears that address's failures on that
// link, so a visitor's own typos do not pile up.

/** bcrypt cost of link passwords: about 60 ms a hash on one core; a link password guards a redirect, not an account. */
export const LINK_PASSWORD_COST = 10;
/** bcrypt reads at most 72 bytes: a longer password would be cut without a word, so it is refused. */
export const MAX_PASSWORD_BYTES = 72;
export const PASSWORD_RULE = `password must be a text of 1 to ${MAX_PASSWORD_BYTES} bytes (UTF-8)`;

/** How many guesses are let through to the password check. */
export const LINK_PASSWORD_LIMITS = {
  /** From one client address on one link: a person mistyping gets this many tries. */
  perLinkAndAddress: 10,
  /** On one link from every address together: a guess spread over many addresses. */
  perLink: 100,
  /** From one client address on every link together: one client guessing many links. */
  perAddress: 30,
  windowMs: 15 * 60_000,
};

/** The service's hasher: cost 10, one low-priority worker per core, queues bounded by BCRYPT_QUEUE_MAX. */
export function linkPasswordHasher(opts: Omit<PasswordHasherOptions, 'cost'> = {}): PasswordHasher {
  return new PasswordHasher({ cost: LINK_PASSWORD_COST, ...opts });
}

/** A password as a create or a change takes it; 400 naming the field otherwise. */
export function parsePassword(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.includes('\u0000') || Buffer.byteLength(value) > MAX_PASSWORD_BYTES) {
    throw badRequest(`${field}/${PASSWORD_RULE}`);
  }
  return value;
}

/** The outcome of one guess: right, wrong, or refused before any check (when to come back). */
export type GuessOutcome = { result: 'right' } | { result: 'wrong' } | { result: 'limited'; retryAfterSeconds: number };

export class LinkPasswords {
  constructor(
    readonly hasher: PasswordHasher,
    private readonly store: CounterStore,
    private readonly clock: Clock,
    private readonly prefixes: Ipv6Prefixes,
    readonly limits = LINK_PASSWORD_LIMITS,
  ) {}

  hash(password: string): Promise<string> {
    return this.hasher.hash(password);
  }

  /**
   * Counts the guess on the (link, address) pair, the link and the address, then compares it
   * with the hash only if every count was below its limit. A wrong guess keeps its counts; a
   * right one gives them back; a check that never answered (the hashing queue full) too.
   */
  async guess(code: string, ip: string | undefined, password: string, hash: string): Promise<GuessOutcome> {
    const addresses = rateLimitKeys(ip, this.prefixes);
    const { windowMs } = this.limits;
    const limits: WindowLimit[] = [
      { key: `pair:${code}:${addresses[0]}`, max: this.limits.perLinkAndAddress, windowMs },
      { key: `link:${code}`, max: this.limits.perLink, windowMs },
      // IPv6: the address's /64, then its /48 with 16 times the room, as every limit of the service.
      ...addresses.map((address, level) => ({
        key: `address:${address}`,
        max: this.limits.perAddress * (level === 0 ? 1 : IPV6_WIDE_FACTOR),
        windowMs,
      })),
    ];
    const reservation = await this.store.reserve(limits);
    if (!reservation.admitted) {
      const now = this.clock();
      const ends = reservation.windows
        .filter((window, i) => window.count >= limits[i]!.max)
        .map((window) => Math.ceil((window.resetAt - now) / 1000));
      return { result: 'limited', retryAfterSeconds: Math.max(1, ...ends) };
    }
    // The kit's login attempt does what a guess needs: a success resets the pair and gives the rest back.
    const attempt = new LoginAttempt(this.store, limits, reservation.windowIds);
    let right: boolean;
    try {
      right = await this.hasher.verify(password, hash);
    } catch (err) {
      await attempt.abandoned();
      throw err;
    }
    if (right) await attempt.succeeded();
    return right ? { result: 'right' } : { result: 'wrong' };
  }
}
