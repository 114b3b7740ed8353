import type { Redis } from 'ioredis';
import { type Clock, systemClock } from './clock.js';
import { IPV6_WIDE_FACTOR, type Ipv6Prefixes, rateLimitKeys } from './http/client-ip.js';

// A fixed-window counter: the window of a key starts at its first hit and
// lasts windowMs; the count resets when it ends. Two stores: one in the
// process (the contract's own behaviour, docs/shortener.md) and one in Redis (shared by N instances).

export interface WindowState {
  count: number;
  /** When the window ends, in ms since the epoch. */
  resetAt: number;
}

/** One key of a reserve(): its limit and its window length. */
export interface WindowLimit {
  key: string;
  max: number;
  windowMs: number;
  /**
   * The index of another key of the same reserve(): this key is checked and counted only when
   * that one's window holds no count yet (counting something once per new other key, e.g. the
   * distinct accounts that failed from one address). Unset: always.
   */
  onlyIfNew?: number;
}

export interface Reservation {
  /** True when every key was below its max: each was counted. False: none was. */
  admitted: boolean;
  /** Each key's window after the call, in the order given. */
  windows: WindowState[];
  /** Tells each counted window from a later window of the same key, for release(); '' for a key not counted. */
  windowIds: string[];
}

export interface CounterStore {
  /** Adds `amount` (one unless told) to the key's window (starting a new window when none is open) and returns it. */
  hit(key: string, windowMs: number, amount?: number): Promise<WindowState>;
  /** The open window of the key, or undefined, without counting. */
  peek(key: string): Promise<WindowState | undefined>;
  /** Ends the key's window early (e.g. a successful login clears its failures). */
  reset(key: string): Promise<void>;
  /**
   * Counts one on every key if and only if each is below its max, atomically
   * (across instances too): concurrent callers can never together pass a max.
   * A key with `onlyIfNew` takes part only when its other key holds no count.
   */
  reserve(limits: WindowLimit[]): Promise<Reservation>;
  /** Gives back one count of reserve(), unless that window has ended since (a new window is left alone). */
  release(key: string, windowId: string, windowMs: number): Promise<void>;
}

export class MemoryCounterStore implements CounterStore {
  // Insertion order is window-start order (a new window re-inserts its key),
  // so expired windows are always a prefix of the map: sweeping stops early.
  private readonly windows = new Map<string, WindowState>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly clock: Clock = systemClock,
    /** Bounds memory under a flood of distinct keys; the oldest window is dropped beyond it. */
    private readonly maxKeys = 200_000,
    sweepEveryMs = 10_000,
  ) {
    this.timer = setInterval(() => this.sweep(), sweepEveryMs);
    this.timer.unref();
  }

  get size(): number {
    return this.windows.size;
  }

  async hit(key: string, windowMs: number, amount = 1): Promise<WindowState> {
    return this.hitNow(key, windowMs, amount);
  }

  // Synchronous, so reserve() checks and counts several keys with nothing in between.
  private hitNow(key: string, windowMs: number, amount = 1): WindowState {
    const now = this.clock();
    const open = this.windows.get(key);
    if (open && open.resetAt > now) {
      open.count += amount;
      return { ...open };
    }
    if (open) this.windows.delete(key);
    if (this.windows.size >= this.maxKeys) {
      this.sweep();
      if (this.windows.size >= this.maxKeys) {
        const oldest = this.windows.keys().next().value;
        if (oldest !== undefined) this.windows.delete(oldest);
      }
    }
    const fresh = { count: amount, resetAt: now + windowMs };
    this.windows.set(key, fresh);
    return { ...fresh };
  }

  async peek(key: string): Promise<WindowState | undefined> {
    const open = this.windows.get(key);
    return open && open.resetAt > this.clock() ? { ...open } : undefined;
  }

  async reset(key: string): Promise<void> {
    this.windows.delete(key);
  }

  async reserve(limits: WindowLimit[]): Promise<Reservation> {
    const now = this.clock();
    const open = limits.map(({ key }) => {
      const state = this.windows.get(key);
      return state && state.resetAt > now ? { ...state } : { count: 0, resetAt: now };
    });
    const applies = limits.map((limit) => limit.onlyIfNew === undefined || open[limit.onlyIfNew]!.count === 0);
    if (limits.some((limit, i) => applies[i] && open[i]!.count >= limit.max)) return { admitted: false, windows: open, windowIds: [] };
    const windows = limits.map(({ key, windowMs }, i) => (applies[i] ? this.hitNow(key, windowMs) : open[i]!));
    // A key's next window ends at least windowMs after this one: the end time names the window.
    return { admitted: true, windows, windowIds: windows.map((w, i) => (applies[i] ? `m${w.resetAt}` : '')) };
  }

  async release(key: string, windowId: string): Promise<void> {
    if (windowId === '') return;
    const open = this.windows.get(key);
    if (open && open.resetAt > this.clock() && `m${open.resetAt}` === windowId && open.count > 0) open.count -= 1;
  }

  /** Drops expired windows. */
  sweep(): void {
    const now = this.clock();
    for (const [key, state] of this.windows) {
      if (state.resetAt > now) {
        // Windows of one limiter all have the same length, so the rest are younger.
        break;
      }
      this.windows.delete(key);
    }
  }

  close(): void {
    clearInterval(this.timer);
  }
}

// INCRBY, start the window on the first hit, read the time left: one atomic round trip.
const HIT_SCRIPT = `
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}`;

const PEEK_SCRIPT = `
local count = redis.call('GET', KEYS[1])
if not count then return nil end
return {tonumber(count), redis.call('PTTL', KEYS[1])}`;

// Checks every key against its max (ARGV: max, windowMs and the 1-based index
// of its onlyIfNew key or 0, per key) and counts on all of them only when all
// are below: one script, so no other client's INCR falls in between. A key
// whose onlyIfNew key already holds a count is neither checked nor counted.
// Returns admitted, then per key the count, the time left, the window's end on
// Redis's clock (which names the window) and 1 when it was counted.
const RESERVE_SCRIPT = `
local before = {}
for i, key in ipairs(KEYS) do before[i] = tonumber(redis.call('GET', key) or '0') end
local applies = {}
for i = 1, #KEYS do
  local other = tonumber(ARGV[3 * i])
  applies[i] = other == 0 or before[other] == 0
end
local admitted = 1
for i = 1, #KEYS do
  if applies[i] and before[i] >= tonumber(ARGV[3 * i - 2]) then admitted = 0 end
end
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local out = {admitted}
for i, key in ipairs(KEYS) do
  local count = before[i]
  local ttl = redis.call('PTTL', key)
  local counted = 0
  if admitted == 1 and applies[i] then
    count = redis.call('INCR', key)
    counted = 1
    if ttl < 0 then
      ttl = tonumber(ARGV[3 * i - 1])
      redis.call('PEXPIRE', key, ttl)
    end
  end
  if ttl < 0 then ttl = 0 end
  table.insert(out, count)
  table.insert(out, ttl)
  table.insert(out, now + ttl)
  table.insert(out, counted)
end
return out`;

// Takes one back only while the key is in the window that reserve() counted
// in: its end, on Redis's clock, within half a window of the one recorded
// (a later window ends at least a whole window later).
const RELEASE_SCRIPT = `
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then return 0 end
local now = redis.call('TIME')
local ends = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
if math.abs(ends - tonumber(ARGV[1])) * 2 >= tonumber(ARGV[2]) then return 0 end
if tonumber(redis.call('GET', KEYS[1]) or '0') <= 0 then return 0 end
redis.call('DECR', KEYS[1])
return 1`;

type ScriptedRedis = Redis & {
  rateLimitHit(key: string, windowMs: number, amount: number): Promise<[number, number]>;
  rateLimitPeek(key: string): Promise<[number, number] | null>;
  rateLimitReserve(numberOfKeys: number, ...keysAndArgs: Array<string | number>): Promise<number[]>;
  rateLimitRelease(key: string, windowEnd: number, windowMs: number): Promise<number>;
};

/**
 * Counters in Redis, shared by every instance. While Redis is unreachable the
 * limiter keeps limiting with counters in this process (documented fallback),
 * so an outage never turns into unlimited access nor into failed requests.
 */
export class RedisCounterStore implements CounterStore {
  private readonly redis: ScriptedRedis;
  private lastWarning = 0;

  constructor(
    redis: Redis,
    private readonly prefix: string,
    private readonly fallback: MemoryCounterStore,
    private readonly clock: Clock = systemClock,
    private readonly warn: (msg: string) => void = () => {},
  ) {
    redis.defineCommand('rateLimitHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
    redis.defineCommand('rateLimitPeek', { numberOfKeys: 1, lua: PEEK_SCRIPT });
    redis.defineCommand('rateLimitReserve', { lua: RESERVE_SCRIPT });
    redis.defineCommand('rateLimitRelease', { numberOfKeys: 1, lua: RELEASE_SCRIPT });
    this.redis = redis as ScriptedRedis;
  }

  private degraded(err: unknown): void {
    const now = Date.now();
    if (now - this.lastWarning > 10_000) {
      this.lastWarning = now;
      this.warn(`redis unavailable, rate limits use in-process counters: ${(err as Error).message}`);
    }
  }

  async hit(key: string, windowMs: number, amount = 1): Promise<WindowState> {
    try {
      const [count, ttl] = await this.redis.rateLimitHit(this.prefix + key, windowMs, amount);
      return { count, resetAt: this.clock() + ttl };
    } catch (err) {
      this.degraded(err);
      return this.fallback.hit(key, windowMs, amount);
    }
  }

  async peek(key: string): Promise<WindowState | undefined> {
    try {
      const found = await this.redis.rateLimitPeek(this.prefix + key);
      return found ? { count: found[0], resetAt: this.clock() + Math.max(found[1], 0) } : undefined;
    } catch (err) {
      this.degraded(err);
      return this.fallback.peek(key);
    }
  }

  async reset(key: string): Promise<void> {
    await this.fallback.reset(key);
    try {
      await this.redis.del(this.prefix + key);
    } catch (err) {
      this.degraded(err);
    }
  }

  async reserve(limits: WindowLimit[]): Promise<Reservation> {
    try {
      const args = limits.flatMap((l) => [l.max, l.windowMs, l.onlyIfNew === undefined ? 0 : l.onlyIfNew + 1]);
      const [admitted, ...rest] = await this.redis.rateLimitReserve(limits.length, ...limits.map((l) => this.prefix + l.key), ...args);
      const now = this.clock();
      const windows = limits.map((_, i) => ({ count: rest[4 * i]!, resetAt: now + rest[4 * i + 1]! }));
      const windowIds = admitted === 1 ? limits.map((_, i) => (rest[4 * i + 3] === 1 ? `r${rest[4 * i + 2]}` : '')) : [];
      return { admitted: admitted === 1, windows, windowIds };
    } catch (err) {
      this.degraded(err);
      return this.fallback.reserve(limits);
    }
  }

  async release(key: string, windowId: string, windowMs: number): Promise<void> {
    if (windowId === '') return;
    // Counted in this process while Redis was away: given back here.
    if (!windowId.startsWith('r')) return this.fallback.release(key, windowId);
    try {
      await this.redis.rateLimitRelease(this.prefix + key, Number(windowId.slice(1)), windowMs);
    } catch (err) {
      this.degraded(err);
    }
  }
}

export interface RateLimitDecision {
  limited: boolean;
  limit: number;
  remaining: number;
  /** Whole seconds until the window ends, rounded up. */
  retryAfterSeconds: number;
}

/** `max` requests per `windowMs` per key; every request counts, rejected ones included. */
export class FixedWindowLimiter {
  constructor(
    readonly max: number,
    readonly windowMs: number,
    private readonly store: CounterStore,
    private readonly clock: Clock = systemClock,
  ) {}

  private decide(state: WindowState | undefined, max = this.max): RateLimitDecision {
    const count = state?.count ?? 0;
    return {
      limited: count > max,
      limit: max,
      remaining: Math.max(max - count, 0),
      retryAfterSeconds: state ? Math.max(Math.ceil((state.resetAt - this.clock()) / 1000), 0) : 0,
    };
  }

  /** Counts the request (as `amount` units, one unless told), then compares with the maximum. */
  async consume(key: string, amount = 1): Promise<RateLimitDecision> {
    return this.decide(await this.store.hit(key, this.windowMs, amount));
  }

  /**
   * Counts a request from a client address at each level it is limited at (rateLimitKeys: its
   * own address or /64, and for IPv6 its /48 with IPV6_WIDE_FACTOR times the maximum), each key
   * under `keyPrefix`, as `amount` units (one unless told). Limited when any level is; the
   * decision reported is the client's own, or the limited level's.
   */
  async consumeAddress(keyPrefix: string, ip: string | undefined, prefixes: Ipv6Prefixes, amount = 1): Promise<RateLimitDecision> {
    const keys = rateLimitKeys(ip, prefixes);
    const states = await Promise.all(keys.map((key) => this.store.hit(keyPrefix + key, this.windowMs, amount)));
    const decisions = states.map((state, i) => this.decide(state, i === 0 ? this.max : this.max * IPV6_WIDE_FACTOR));
    return decisions.find((d) => d.limited) ?? decisions[0]!;
  }

  /**
   * Counts `amount` units at once (one per item of a batch) and says how many of them fit under
   * the maximum: the first `admitted`. The counter moves by `amount` in one atomic step, so
   * concurrent callers each get their own range of it and together never admit more than the
   * maximum; the units beyond it count too, as a refused request does.
   */
  async consumeUnits(key: string, amount: number): Promise<RateLimitDecision & { admitted: number }> {
    const state = await this.store.hit(key, this.windowMs, amount);
    return { ...this.decide(state), admitted: admittedUnits(state.count, amount, this.max) };
  }

  /** consumeUnits for a client address, at each level consumeAddress counts it at; admitted is the least of the levels. */
  async consumeAddressUnits(
    keyPrefix: string,
    ip: string | undefined,
    prefixes: Ipv6Prefixes,
    amount: number,
  ): Promise<RateLimitDecision & { admitted: number }> {
    const keys = rateLimitKeys(ip, prefixes);
    const states = await Promise.all(keys.map((key) => this.store.hit(keyPrefix + key, this.windowMs, amount)));
    const maxOf = (i: number) => (i === 0 ? this.max : this.max * IPV6_WIDE_FACTOR);
    const admitted = Math.min(...states.map((state, i) => admittedUnits(state.count, amount, maxOf(i))));
    const decisions = states.map((state, i) => this.decide(state, maxOf(i)));
    return { ...(decisions.find((d) => d.limited) ?? decisions[0]!), admitted };
  }

  async reset(key: string): Promise<void> {
    await this.store.reset(key);
  }
}

/** Of `amount` units that brought a window's count to `count`, how many are within `max`. */
function admittedUnits(count: number, amount: number, max: number): number {
  return Math.max(0, Math.min(amount, max - (count - amount)));
}
