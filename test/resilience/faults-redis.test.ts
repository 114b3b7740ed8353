// Redis unreachable while REDIS_URL is set, on a private redis-server that the
// test kills (SIGKILL) and starts again on the same port. Two shortener
// instances share it. While it is away: redirects keep working; create keeps
// limiting with the documented in-process fallback (never a 500, never
// unlimited: at most 10 per window per instance from one address). When it is
// back, the instances count in Redis again, so the limit is shared once more.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { createLink } from './helpers/api.js';
import { reportFigures, round } from './helpers/figures.js';
import { jsonOf, type Outcome, send, sleep, waitUntil } from './helpers/http.js';
import { type PrivateRedis, startPrivateRedis } from './helpers/redis.js';
import { ensureStopped, startShortener } from './helpers/services.js';
import { clientIps } from '../helpers/client-ips.js';
import { shortenerDatabase } from '../helpers/shortener.js';

const PREFIX = 'shortener:create:';

let db: TestDatabase;
let redis: PrivateRedis;
let inspector: Redis;
const instances: ServiceProcess[] = [];

before(async () => {
  db = await shortenerDatabase();
  redis = await startPrivateRedis();
  // The test's own view of Redis; it reconnects by itself after the restart.
  inspector = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 100 });
  inspector.on('error', () => {});
});

after(async () => {
  for (const instance of instances) await ensureStopped(instance);
  inspector?.disconnect();
  await redis?.destroy();
  await db.drop();
});

type Target = { url: string; agent: false };

function create(target: Target, ip: string): Promise<Outcome> {
  return send(
    target,
    { method: 'POST', path: '/api/links', json: { url: 'https://example.com/redis' }, headers: { 'x-forwarded-for': ip } },
    10_000,
  );
}

/** `n` creates in turn from `ip`, alternating over the targets; the statuses in order. */
async function creates(targets: Target[], ip: string, n: number): Promise<Outcome[]> {
  const out: Outcome[] = [];
  for (let i = 0; i < n; i++) out.push(await create(targets[i % targets.length]!, ip));
  return out;
}

const statusCounts = (outcomes: Outcome[]) => {
  const counts: Record<string, number> = {};
  for (const o of outcomes) counts[o.ok ? String(o.status) : o.error] = (counts[o.ok ? String(o.status) : o.error] ?? 0) + 1;
  return counts;
};

test('Redis killed and restarted: redirects go on, creates stay limited per instance, shared counting resumes', async (t) => {
  for (let i = 0; i < 2; i++) instances.push(await startShortener(db.url, { redisUrl: redis.url, trustProxy: '127.0.0.1' }));
  const targets: Target[] = instances.map((instance) => ({ url: instance.url, agent: false }));
  const ip = clientIps();
  const code = await createLink(targets[0]!, ip(0));

  // Redis up: one address, 12 creates over both instances: 10 in total, counted in Redis.
  const shared = await creates(targets, ip(1), 12);
  assert.deepEqual(statusCounts(shared), { 201: 10, 429: 2 }, 'shared limit with Redis up');
  assert.equal(await inspector.get(`${PREFIX}${ip(1)}`), '12');

  await redis.kill();
  const killedAt = Date.now();

  // Redis down: redirects keep working on both instances.
  const redirects = await Promise.all(targets.flatMap((target) => Array.from({ length: 20 }, () => send(target, { path: `/${code}` }))));
  assert.deepEqual(statusCounts(redirects), { 302: 40 }, 'redirects while Redis is down');

  // Creates from one address: each instance allows at most 10 in its own window, then 429.
  const perInstance: Array<Record<string, number>> = [];
  const latencies: number[] = [];
  for (const target of targets) {
    const outcomes = await creates([target], ip(2), 15);
    latencies.push(...outcomes.map((o) => o.ms));
    perInstance.push(statusCounts(outcomes));
    assert.deepEqual(statusCounts(outcomes), { 201: 10, 429: 5 }, 'in-process fallback limit of one instance');
    for (const o of outcomes.slice(10)) {
      assert.equal((jsonOf(o) as { status: number }).status, 429);
      assert.match(String(o.ok && o.headers['retry-after']), /^\d+$/);
    }
  }
  // A burst at once from a further address: never more than 10 per instance.
  const burst = await Promise.all(Array.from({ length: 40 }, (_, i) => create(targets[i % 2]!, ip(3))));
  assert.deepEqual(statusCounts(burst), { 201: 20, 429: 20 }, 'a concurrent burst while Redis is down');
  // Long enough for the reconnection back-off to reach its 2 s ceiling.
  await sleep(Math.max(0, 5000 - (Date.now() - killedAt)));
  const downForMs = Date.now() - killedAt;

  // Redis back (empty: no persistence). Both instances reconnect and count there again.
  await redis.start();
  const restartedAt = Date.now();
  let probe = 100;
  const recoveredInMs = await waitUntil(
    async () => {
      // A fresh address per probe on each instance; shared again once both land in Redis.
      const results = await Promise.all(
        targets.map(async (target) => {
          const address = ip(probe++);
          await create(target, address);
          return (await inspector.get(`${PREFIX}${address}`).catch(() => null)) === '1';
        }),
      );
      return results.every(Boolean);
    },
    15_000,
    'both instances to count in Redis again',
    200,
  );
  const again = await creates(targets, ip(4), 14);
  assert.deepEqual(statusCounts(again), { 201: 10, 429: 4 }, 'shared limit after Redis returned');
  assert.equal(await inspector.get(`${PREFIX}${ip(4)}`), '14');

  reportFigures(t, 'Redis unreachable', {
    redis_down_ms: downForMs,
    redirects_while_down: statusCounts(redirects),
    creates_per_instance_while_down: perInstance.map((c) => `${c['201']}x201+${c['429']}x429`).join(', '),
    create_max_ms_while_down: round(Math.max(...latencies)),
    concurrent_burst_while_down: statusCounts(burst),
    shared_again_after_restart_ms: round(recoveredInMs),
    restart_to_check_ms: Date.now() - restartedAt,
  });
});
