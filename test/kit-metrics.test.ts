import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commonVars, loadConfig } from '../src/kit/config.js';
import { createPool, type PoolClient } from '../src/kit/db.js';
import { type App, buildHttpApp, type HttpAppOptions } from '../src/kit/http/app.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import { adminUrl } from './helpers/database.js';
import { sampleValue, scrape } from './helpers/metrics.js';

const TOKEN = 'metrics-token-0123456789abcdef';

async function withServer<T>(fn: (app: App) => Promise<T>, opts: Partial<HttpAppOptions> = {}): Promise<T> {
  const app = await buildHttpApp({ title: 'test', logLevel: 'silent', errorBody: statusEnvelope, readiness: async () => {}, ...opts });
  app.get('/api/links/:code', async (request) => ({ code: (request.params as { code: string }).code }));
  app.get('/fails', async () => {
    throw new Error('boom');
  });
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}

const count = (text: string, labels: Record<string, string>) => sampleValue(text, 'http_request_duration_seconds_count', labels);

describe('metrics: exposition', () => {
  it('answers Prometheus text with the process figures and request durations by route template and status class', async () => {
    await withServer(async (app) => {
      for (const code of ['Zq9Xw2P', 'Kk7Rr3T', 'Mm1Nn2B']) await app.inject({ method: 'GET', url: `/api/links/${code}` });
      await app.inject({ method: 'GET', url: '/no/such/path-Yy8Uu7I' });
      await app.inject({ method: 'POST', url: '/api/links/Pp0Oo9L' });
      await app.inject({ method: 'GET', url: '/fails' });

      const res = await app.inject({ method: 'GET', url: '/metrics' });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
      const text = res.body;
      for (const name of [
        'process_cpu_user_seconds_total',
        'process_resident_memory_bytes',
        'nodejs_eventloop_lag_seconds',
        'nodejs_heap_size_used_bytes',
      ]) {
        assert.ok(sampleValue(text, name) !== undefined, `${name} is reported`);
      }
      assert.equal(count(text, { method: 'GET', route: '/api/links/:code', status_class: '2xx' }), 3);
      // Unknown paths, and a known path with a method it does not have, share one label value.
      assert.equal(count(text, { method: 'GET', route: 'unmatched', status_class: '4xx' }), 1);
      assert.equal(count(text, { method: 'POST', route: 'unmatched', status_class: '4xx' }), 1);
      assert.equal(count(text, { method: 'GET', route: '/fails', status_class: '5xx' }), 1);
      assert.ok(
        sampleValue(text, 'http_request_duration_seconds_bucket', { method: 'GET', route: '/fails', status_class: '5xx', le: '+Inf' }) ===
          1,
      );
      // The raw URLs are nowhere, labels or elsewhere.
      for (const raw of ['Zq9Xw2P', 'Kk7Rr3T', 'Mm1Nn2B', 'Yy8Uu7I', 'Pp0Oo9L', '/no/such'])
        assert.ok(!text.includes(raw), `${raw} appears in the exposition`);
      // Each metric family appears once (the process part and the app part do not overlap).
      const families = text
        .split('\n')
        .filter((l) => l.startsWith('# TYPE '))
        .map((l) => l.split(' ')[2]);
      assert.equal(new Set(families).size, families.length);
    });
  });

  it('each app has its own registry: two apps in one process count only their own requests', async () => {
    await withServer(async (one) => {
      await withServer(async (two) => {
        await one.inject({ method: 'GET', url: '/api/links/abc' });
        await one.inject({ method: 'GET', url: '/api/links/abc' });
        await two.inject({ method: 'GET', url: '/api/links/abc' });
        assert.equal(count(await scrape(one), { method: 'GET', route: '/api/links/:code', status_class: '2xx' }), 2);
        assert.equal(count(await scrape(two), { method: 'GET', route: '/api/links/:code', status_class: '2xx' }), 1);
      });
    });
  });

  it('is not part of the OpenAPI document', async () => {
    await withServer(async (app) => {
      const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json() as { paths: Record<string, unknown> };
      assert.equal(doc.paths['/metrics'], undefined);
    });
  });
});

describe('metrics: protection', () => {
  it('without a token: loopback clients only, never a forwarded request; others get the 404 of an unknown path', async () => {
    await withServer(async (app) => {
      for (const local of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1']) {
        assert.equal((await app.inject({ method: 'GET', url: '/metrics', remoteAddress: local })).statusCode, 200, local);
      }
      for (const [remoteAddress, headers] of [
        ['203.0.113.7', {}],
        ['10.0.0.8', {}],
        ['::ffff:10.0.0.8', {}],
        ['fe80::1', {}],
        // A reverse proxy on the same host: the request looks local but is not.
        ['127.0.0.1', { 'x-forwarded-for': '198.51.100.4' }],
        ['127.0.0.1', { forwarded: 'for=198.51.100.4' }],
      ] as Array<[string, Record<string, string>]>) {
        const res = await app.inject({ method: 'GET', url: '/metrics', remoteAddress, headers });
        assert.equal(res.statusCode, 404, `${remoteAddress} ${JSON.stringify(headers)}`);
        assert.deepEqual(res.json(), { status: 404, response: 'Not Found', message: 'Route GET /metrics not found' });
      }
    });
    // A trusted proxy on loopback: the client it names decides.
    await withServer(
      async (app) => {
        const res = await app.inject({
          method: 'GET',
          url: '/metrics',
          remoteAddress: '127.0.0.1',
          headers: { 'x-forwarded-for': '198.51.100.4' },
        });
        assert.equal(res.statusCode, 404);
      },
      { trustProxy: '127.0.0.1' },
    );
  });

  it('answers over real HTTP on the loopback interface', async () => {
    await withServer(async (app) => {
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      const res = await fetch(`${url}/metrics`);
      assert.equal(res.status, 200);
      assert.match(await res.text(), /# TYPE http_request_duration_seconds histogram/);
    });
  });

  it('with METRICS_TOKEN: the matching bearer token is needed from anywhere, loopback included', async () => {
    await withServer(
      async (app) => {
        const cases: Array<[string | undefined, string, number]> = [
          [undefined, '127.0.0.1', 401],
          [undefined, '203.0.113.7', 401],
          ['Bearer wrong-token-0123456789abcdef', '203.0.113.7', 401],
          [`Bearer ${TOKEN}x`, '203.0.113.7', 401],
          [`Bearer ${TOKEN.slice(0, -1)}`, '203.0.113.7', 401],
          ['Bearer ', '203.0.113.7', 401],
          [TOKEN, '203.0.113.7', 401],
          [`Basic ${TOKEN}`, '203.0.113.7', 401],
          [`Bearer ${TOKEN}`, '203.0.113.7', 200],
          [`bearer ${TOKEN}`, '10.0.0.8', 200],
          [`Bearer ${TOKEN}`, '127.0.0.1', 200],
        ];
        for (const [authorization, remoteAddress, status] of cases) {
          const res = await app.inject({
            method: 'GET',
            url: '/metrics',
            remoteAddress,
            headers: authorization === undefined ? {} : { authorization, 'x-forwarded-for': '198.51.100.4' },
          });
          assert.equal(res.statusCode, status, `${authorization} from ${remoteAddress}`);
          if (status === 401) {
            assert.equal(res.headers['www-authenticate'], 'Bearer');
            assert.deepEqual(res.json(), { status: 401, response: 'Unauthorized', message: 'Metrics need a valid bearer token' });
          } else {
            assert.match(res.body, /http_request_duration_seconds/);
          }
        }
      },
      { metrics: { token: TOKEN } },
    );
  });

  it('METRICS_TOKEN is optional, and refused when shorter than 16 bytes', () => {
    assert.equal(loadConfig(commonVars(3000), {}).METRICS_TOKEN, undefined);
    assert.equal(loadConfig(commonVars(3000), { METRICS_TOKEN: TOKEN }).METRICS_TOKEN, TOKEN);
    assert.throws(() => loadConfig(commonVars(3000), { METRICS_TOKEN: 'short' }), /METRICS_TOKEN must be at least 16 bytes long/);
  });
});

describe('metrics: connection pools', () => {
  it('reports in-use, idle and waiting counts of each pool, read when scraped', async () => {
    const pool = createPool(adminUrl(), { max: 2, applicationName: 'kit-metrics-test' });
    const held: PoolClient[] = [];
    try {
      await withServer(
        async (app) => {
          const gauges = async () => {
            const text = await scrape(app);
            return {
              inUse: sampleValue(text, 'db_pool_connections', { pool: 'main', state: 'in_use' }),
              idle: sampleValue(text, 'db_pool_connections', { pool: 'main', state: 'idle' }),
              waiting: sampleValue(text, 'db_pool_waiting_requests', { pool: 'main' }),
            };
          };
          assert.deepEqual(await gauges(), { inUse: 0, idle: 0, waiting: 0 });
          held.push(await pool.connect(), await pool.connect());
          const queued = pool.query('SELECT 1');
          assert.deepEqual(await gauges(), { inUse: 2, idle: 0, waiting: 1 });
          held.pop()!.release();
          await queued;
          held.pop()!.release();
          assert.deepEqual(await gauges(), { inUse: 0, idle: 2, waiting: 0 });
        },
        { metrics: { pools: { main: pool } } },
      );
    } finally {
      for (const client of held) client.release();
      await pool.end();
    }
  });
});
