import type { Redis } from 'ioredis';
import { redisReady } from '../../src/kit/redis.js';

// Tests of Redis-backed behaviour run only when the run has a Redis (CI always
// sets REDIS_URL); otherwise node's test runner prints this reason beside the skip.
export const withoutRedis: string | false = process.env.REDIS_URL
  ? false
  : 'REDIS_URL is not set: Redis-backed behaviour is tested only against a real Redis';

/**
 * Resolves once the client is connected: the services' clients run without an offline queue,
 * so a command sent before then fails. The bound is generous because it only matters on a
 * machine starved by other suites; a healthy connection is ready in milliseconds.
 */
export async function waitReady(redis: Redis): Promise<void> {
  if (!(await redisReady(redis, 20_000))) throw new Error(`redis not ready after 20 s: ${redis.status}`);
}
