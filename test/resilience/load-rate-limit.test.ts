// Two shortener instances (processes) on one PostgreSQL and one Redis; 200
// concurrent creates from one client address, spread over both: the limit is
// shared, so exactly 10 succeed in the window, in total, and the rest are 429.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { reportFigures, round } from './helpers/figures.js';
import { keepAliveAgent, send } from './helpers/http.js';
import { queryOnce } from './helpers/postgres.js';
import { type PrivateRedis, startPrivateRedis } from './helpers/redis.js';
import { ensureStopped, startShortener } from './helpers/services.js';
import { clientIps } from '../helpers/client-ips.js';
import { shortenerDatabase } from '../helpers/shortener.js';

const CREATES = 200;

let db: TestDatabase;
let ownRedis: PrivateRedis | undefined;
const instances: ServiceProcess[] = [];

before(async () => {
  db = await shortenerDatabase();
});

after(async () => {
  for (const instance of instances) await ensureStopped(instance);
  await ownRedis?.destroy();
  await db.drop();
});

test('200 concurrent creates from one IP over two instances sharing Redis: exactly 10 succeed', async (t) => {
  // The Redis CI provides; a private one when the run has none, so the test never skips.
  const redisUrl = process.env.REDIS_URL ?? (ownRedis = await startPrivateRedis()).url;
  for (let i = 0; i < 2; i++) instances.push(await startShortener(db.url, { redisUrl, trustProxy: '127.0.0.1' }));
  const targets = instances.map((instance) => ({ url: instance.url, agent: keepAliveAgent(100) }));
  // One address, unique to this run: other tests on the same Redis never share its counter.
  const client = clientIps()(0);
  const marker = `https://example.com/limit/${client}`;

  const started = performance.now();
  const outcomes = await Promise.all(
    Array.from({ length: CREATES }, (_, i) =>
      send(targets[i % 2]!, { method: 'POST', path: '/api/links', json: { url: marker }, headers: { 'x-forwarded-for': client } }),
    ),
  );
  const elapsedMs = performance.now() - started;
  for (const target of targets) (target.agent as { destroy(): void }).destroy();

  const statuses: Record<string, number> = {};
  const createdPerInstance = [0, 0];
  outcomes.forEach((o, i) => {
    const key = o.ok ? String(o.status) : o.error;
    statuses[key] = (statuses[key] ?? 0) + 1;
    if (o.ok && o.status === 201) createdPerInstance[i % 2]! += 1;
  });
  assert.deepEqual(statuses, { 201: 10, 429: CREATES - 10 }, 'exactly 10 created, the rest limited');
  for (const o of outcomes) {
    if (o.ok && o.status === 429) {
      assert.equal(o.headers['x-ratelimit-remaining'], '0');
      assert.match(String(o.headers['retry-after']), /^\d+$/);
    }
  }
  const [stored] = await queryOnce<{ n: number }>(db.url, 'SELECT count(*)::int AS n FROM links WHERE original_url = $1', [marker]);
  assert.equal(stored!.n, 10, 'links stored');

  reportFigures(t, 'shared create limit, 2 instances', {
    concurrent_creates: CREATES,
    statuses,
    created_per_instance: createdPerInstance.join('+'),
    elapsed_ms: round(elapsedMs),
  });
});
