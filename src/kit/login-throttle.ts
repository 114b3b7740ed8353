import type { Clock } from './clock.js';
import { IPV6_WIDE_FACTOR, type Ipv6Prefixes, rateLimitKeys } from './http/client-ip.js';
import type { CounterStore, WindowLimit } from './rate-limit.js';

// Failed password logins, counted as OWASP's Authentication Cheat Sheet recommends against
// brute force without letting anyone lock an owner out: failures are counted per (account,
// client address), so one address can guess an account only `perAccountAndAddress` times a
// window, and its failures never lock the owner out from anywhere else. A much higher ceiling
// per account bounds a guess spread over many addresses; and per address only the *distinct
// accounts* that failed from it are counted (one per new (account, address) pair), so a spray
// over many accounts is bounded while the other users behind one NAT, who fail on other
// accounts a few times, are not locked out by one user's hundred failures.
//
// Every attempt takes its counts BEFORE its password is verified, atomically on every counter
// (one Lua script with Redis): however many guesses arrive at once, at most the limit's worth
// reach the password check; the rest are refused without any hashing.

export interface LoginFailureLimits {
  /** Failures per (account, address) per window: one address guessing one account. */
  perAccountAndAddress: number;
  /** Failures per account from every address together: a guess spread over many addresses. */
  perAccount: number;
  /** Distinct accounts that may fail from one address per window: a spray over many accounts. */
  accountsPerAddress: number;
  windowMs: number;
}

/** The limits without configuration: a tenth of the per-account ceiling from any one address. */
export const DEFAULT_LOGIN_FAILURE_LIMITS: LoginFailureLimits = {
  perAccountAndAddress: 10,
  perAccount: 1000,
  accountsPerAddress: 100,
  windowMs: 15 * 60_000,
};

/** The counter keys of a login attempt (exported so tests can pre-fill a store). */
export function loginFailureKeys(account: string, ip: string | undefined, prefixes: Ipv6Prefixes) {
  const addresses = rateLimitKeys(ip, prefixes);
  return {
    pair: `pair:${account}:${addresses[0]}`,
    account: `account:${account}`,
    /** One per level of the address (IPv6: its /64, then its /48). */
    addresses: addresses.map((address) => `accounts-from:${address}`),
  };
}

/**
 * A login attempt that holds its counts while its password is checked. Left as it is, the
 * counts are the failure. A success gives them back and clears the (account, address) pair's
 * failures (the owner's own typos); an attempt the check never answered gives them back.
 */
export class LoginAttempt {
  constructor(
    private readonly store: CounterStore,
    private readonly limits: WindowLimit[],
    private readonly windowIds: string[],
    /** Records the address as one the account signs in from. */
    private readonly remember: () => Promise<void> = async () => {},
  ) {}

  async succeeded(): Promise<void> {
    const [pair, ...rest] = this.limits;
    await Promise.all([
      this.store.reset(pair!.key),
      ...rest.map((limit, i) => this.store.release(limit.key, this.windowIds[i + 1]!, limit.windowMs)),
      this.remember(),
    ]);
  }

  /** The check never answered (hashing queue full, database down): the guess was not spent. */
  async abandoned(): Promise<void> {
    await Promise.all(this.limits.map((limit, i) => this.store.release(limit.key, this.windowIds[i]!, limit.windowMs)));
  }
}

/** Which limit refused an attempt: the client's own guesses, the account's ceiling, or the address's spray ceiling. */
export type LoginRefusal = { retryAfterSeconds: number; limit: 'account_and_address' | 'account' | 'address'; key: string };

/** How long an address an account signed in from stays exempt from the account's ceiling. */
export const KNOWN_ADDRESS_MS = 30 * 86_400_000;

export class LoginThrottle {
  constructor(
    private readonly store: CounterStore,
    private readonly clock: Clock,
    readonly limits: LoginFailureLimits,
    private readonly prefixes: Ipv6Prefixes,
    /**
     * The addresses each account signed in from (a store of its own: its windows are 30 days
     * long). An attempt from one of them is not held to the per-account ceiling, so even a guess
     * spread over enough addresses to reach it does not lock the owner out where they usually
     * sign in; that address's own (account, address) limit still holds.
     */
    private readonly knownAddresses?: CounterStore,
  ) {}

  /**
   * The attempt, holding its counts, or the refusal. `account` names the account as the login
   * looks it up (a digest of the address, registered or not, so a refusal tells nothing about
   * which are); `ip` is the client's address as the request gives it.
   */
  async reserve(account: string, ip: string | undefined): Promise<LoginAttempt | LoginRefusal> {
    const keys = loginFailureKeys(account, ip, this.prefixes);
    const { windowMs } = this.limits;
    const known = this.knownAddresses;
    const knownKey = `known:${keys.pair.slice('pair:'.length)}`;
    const isKnown = known !== undefined && (await known.peek(knownKey)) !== undefined;
    const limits: WindowLimit[] = [
      { key: keys.pair, max: this.limits.perAccountAndAddress, windowMs },
      // A known address is held to the ceiling with room to spare: never refused by it.
      { key: keys.account, max: isKnown ? Number.MAX_SAFE_INTEGER : this.limits.perAccount, windowMs },
      // Counted only by the first failure of a pair: the distinct accounts, not every failure.
      ...keys.addresses.map((key, level) => ({
        key,
        max: this.limits.accountsPerAddress * (level === 0 ? 1 : IPV6_WIDE_FACTOR),
        windowMs,
        onlyIfNew: 0,
      })),
    ];
    const reservation = await this.store.reserve(limits);
    if (reservation.admitted) {
      const remember = known && !isKnown ? async () => void (await known.hit(knownKey, KNOWN_ADDRESS_MS)) : undefined;
      return new LoginAttempt(this.store, limits, reservation.windowIds, remember);
    }
    const now = this.clock();
    const blocking = limits
      .map((limit, i) => ({ limit, i, window: reservation.windows[i]! }))
      .filter(({ limit, window }) => window.count >= limit.max && (limit.onlyIfNew === undefined || reservation.windows[0]!.count === 0));
    const first = blocking[0] ?? { i: 0, limit: limits[0]!, window: reservation.windows[0]! };
    return {
      retryAfterSeconds: Math.max(1, ...blocking.map(({ window }) => Math.ceil((window.resetAt - now) / 1000))),
      limit: first.i === 0 ? 'account_and_address' : first.i === 1 ? 'account' : 'address',
      key: first.limit.key,
    };
  }
}
