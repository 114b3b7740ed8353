import { Redis } from 'ioredis';

/**
 * The one Redis connection a process shares (rate-limit counters). It fails fast instead of
 * queueing while Redis is away, so callers fall back at once; `onError` hears of every failure.
 */
export function connectRedis(url: string, onError: (err: Error) => void): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 500,
    connectTimeout: 2000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  redis.on('error', onError);
  return redis;
}
