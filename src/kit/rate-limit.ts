import { Redis } from 'ioredis';
import { type Clock, systemClock } from './clock.js';

// A fixed-window counter: the window of a key starts at its first hit and
// lasts windowMs; the count resets when it ends. Two stores: one in the
// process (the spec's own behaviour) and one in Redis (shared by N instances).

export interface WindowState {
  count: number;
  /** When the window ends, in ms since the epoch. */
  resetAt: number;
}

export interface CounterStore {
  /** Adds one to the key's window (starting a new window when none is open) and returns it. */
  hit(key: string, windowMs: number): Promise<WindowState>;
  /** The open window of the key, or undefined, without counting. */
  peek(key: string): Promise<WindowState | undefined>;
  /** Ends the key's window early (e.g. a successful login clears its failures). */
  reset(key: string): Promise<void>;
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

  async hit(key: string, windowMs: number): Promise<WindowState> {
    const now = this.clock();
    const open = this.windows.get(key);
    if (open && open.resetAt > now) {
      open.count += 1;
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
    const fresh = { count: 1, resetAt: now + windowMs };
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

// INCR, start the window on the first hit, read the time left: one atomic round trip.
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
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

type ScriptedRedis = Redis & {
  rateLimitHit(key: string, windowMs: number): Promise<[number, number]>;
  rateLimitPeek(key: string): Promise<[number, number] | null>;
};

export function connectRedis(url: string, onError: (err: Error) => void): Redis {
  const redis = new Redis(url, {
    // Fail fast instead of queueing while Redis is away: callers fall back.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 500,
    connectTimeout: 2000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  redis.on('error', onError);
  return redis;
}

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
    this.redis = redis as ScriptedRedis;
  }

  private degraded(err: unknown): void {
    const now = Date.now();
    if (now - this.lastWarning > 10_000) {
      this.lastWarning = now;
      this.warn(`redis unavailable, rate limits use in-process counters: ${(err as Error).message}`);
    }
  }

  async hit(key: string, windowMs: number): Promise<WindowState> {
    try {
      const [count, ttl] = await this.redis.rateLimitHit(this.prefix + key, windowMs);
      return { count, resetAt: this.clock() + ttl };
    } catch (err) {
      this.degraded(err);
      return this.fallback.hit(key, windowMs);
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

  private decide(state: WindowState | undefined): RateLimitDecision {
    const count = state?.count ?? 0;
    return {
      limited: count > this.max,
      limit: this.max,
      remaining: Math.max(this.max - count, 0),
      retryAfterSeconds: state ? Math.max(Math.ceil((state.resetAt - this.clock()) / 1000), 0) : 0,
    };
  }

  /** Counts the request, then compares with the maximum. */
  async consume(key: string): Promise<RateLimitDecision> {
    return this.decide(await this.store.hit(key, this.windowMs));
  }

  /** Whether the key is already over its limit, without counting (for limits on failures only). */
  async check(key: string): Promise<RateLimitDecision> {
    const state = await this.store.peek(key);
    const decision = this.decide(state);
    return { ...decision, limited: (state?.count ?? 0) >= this.max };
  }

  async reset(key: string): Promise<void> {
    await this.store.reset(key);
  }
}
