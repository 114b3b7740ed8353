// Tests of Redis-backed behaviour run only when the run has a Redis (CI always
// sets REDIS_URL); otherwise node's test runner prints this reason beside the skip.
export const withoutRedis: string | false = process.env.REDIS_URL ? false : 'REDIS_URL is not set: Redis-backed behaviour is tested only against a real Redis';
