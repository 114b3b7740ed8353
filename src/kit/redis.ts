import { Redis } from 'ioredis';

/**
 * How long a command may wait for its answer before the caller falls back to
 * in-process counters. A busy process runs its timers before it reads the
 * answers already waiting on its sockets, so a short timeout gives up on a
 * Redis that did answer, and a shared limit then counts per process. Two
 * seconds rides out a starved event loop; a Redis that hangs holds a request
 * no longer than that.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 2000;

/**
 * How long a service's start waits for its first Redis connection, so that a
 * normal start serves its first request with the shared counters. A Redis
 * still away after it does not stop the start: limits use in-process counters
 * until it connects (warned).
 */
export const REDIS_START_WAIT_MS = 5000;

/**
 * The one Redis connection a process shares (rate-limit counters). It fails fast instead of
 * queueing while Redis is away, so callers fall back at once; `onError` hears of every failure.
 */
export function connectRedis(url: string, onError: (err: Error) => void): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: 2000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  redis.on('error', onError);
  return redis;
}

/** Resolves true once the client is connected, false after `timeoutMs` (it keeps trying in the background). */
export function redisReady(redis: Redis, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const settle = (ready: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ready);
    };
    const onReady = () => settle(true);
    const timer = setTimeout(() => settle(false), timeoutMs);
    redis.once('ready', onReady);
  });
}

/** At a service's start, before it listens: waits up to REDIS_START_WAIT_MS for the first connection, and says so if it did not come. */
export async function awaitRedisAtStart(redis: Redis, log: { warn(msg: string): void }, waitMs = REDIS_START_WAIT_MS): Promise<void> {
  if (!(await redisReady(redis, waitMs))) {
    log.warn(`redis not reachable ${waitMs / 1000} s after the start; rate limits use in-process counters until it is`);
  }
}
