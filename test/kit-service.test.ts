// The service skeleton (src/kit/service.ts): what it opens for a build step, the periodic jobs it
// runs, and the order in which it closes everything.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { commonVars, connectionUrl } from '../src/kit/config.js';
import { createPool } from '../src/kit/db.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import { mailVars } from '../src/kit/mail/transport.js';
import { defineService, startPeriodicJob, startService } from '../src/kit/service.js';
import { type TestDatabase, freshDatabase, withClient } from './helpers/database.js';
import { LogCapture } from './helpers/logs.js';
import { closedPort } from './helpers/ports.js';
import { withoutRedis } from './helpers/redis.js';

const config = { ...commonVars(0), REDIS_URL: connectionUrl(['redis:']), ...mailVars('Kit <kit@localhost>') };
const env = (more: Record<string, string> = {}) => ({ LOG_LEVEL: 'silent', ...more });

const waitFor = async (condition: () => boolean, what: string) => {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 20 s`);
    await sleep(10);
  }
};

describe('periodic jobs', () => {
  test('the first run comes after firstRunAfterMs, not a whole interval later; runs then follow the interval', async () => {
    let runs = 0;
    const stop = startPeriodicJob('count', 3_600_000, async () => void runs++, { warn: () => {} }, { firstRunAfterMs: 20 });
    await waitFor(() => runs === 1, 'first run');
    await sleep(100);
    await stop();
    assert.equal(runs, 1, 'the next run waits for the hourly interval');
  });

  test('a failed run is logged at warn (job_failed) and tried again at the next interval', async () => {
    const warnings: Array<Record<string, unknown>> = [];
    const stop = startPeriodicJob(
      'broken',
      20,
      async () => {
        throw new Error('database away');
      },
      { warn: (obj: Record<string, unknown>) => void warnings.push(obj) },
    );
    await waitFor(() => warnings.length >= 2, 'two failed runs');
    await stop();
    assert.deepEqual(warnings[0], { event: 'job_failed', job: 'broken', err: { message: 'database away' } });
  });

  test('runs never overlap, and stopping waits for the run in progress', async () => {
    let active = 0;
    let most = 0;
    let finished = 0;
    const stop = startPeriodicJob(
      'slow',
      5,
      async () => {
        active++;
        most = Math.max(most, active);
        await sleep(60);
        active--;
        finished++;
      },
      { warn: () => {} },
    );
    await waitFor(() => active === 1, 'a run in progress');
    await stop();
    assert.equal(active, 0, 'stop resolved only after the run finished');
    assert.equal(most, 1);
    const done = finished;
    await sleep(50);
    assert.equal(finished, done, 'no run after stop');
  });
});

describe('startService', () => {
  let db: TestDatabase;
  before(async () => {
    db = await freshDatabase('kitservice', []);
  });
  after(async () => {
    await db.drop();
  });

  test('applies the mail outbox under the kit scope, runs jobs once up, and closes jobs before the pool', async () => {
    const events: string[] = [];
    const definition = defineService({
      name: 'kitdemo',
      config,
      mail: true,
      async build({ httpApp, every, onClose, pool }) {
        const app = await httpApp({ title: 'demo', errorBody: statusEnvelope });
        every('tick', 10, async () => {
          events.push('job start');
          await sleep(40);
          // The pool is still open while a run finishes, even when the service is stopping.
          await pool.query('SELECT 1');
          events.push('job end');
        });
        onClose(() => void events.push('build closer'));
        return app;
      },
    });
    const running = await startService(definition, { env: env({ DATABASE_URL: db.url }) });
    const { rows } = await running.pool!.query("SELECT name FROM schema_migrations WHERE scope = 'mail'");
    assert.deepEqual(rows, [{ name: '001_outbox.sql' }]);
    await waitFor(() => events.includes('job start'), 'a job run');
    await running.close();
    assert.equal(events.at(-1), 'job end', `the run in progress finished before the pool closed: ${events.join(', ')}`);
    assert.ok(events.indexOf('build closer') >= 0);
  });

  test('a build that fails closes what the kit opened: no connection is left behind', async () => {
    const definition = defineService({
      name: 'kitbroken',
      config,
      async build() {
        throw new Error('build failed on purpose');
      },
    });
    await assert.rejects(startService(definition, { env: env({ DATABASE_URL: db.url }) }), /build failed on purpose/);
    const open = await withClient(db.url, (c) =>
      c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'kitbroken'"),
    );
    assert.equal(open.rows[0].n, 0);
  });

  test('a service without a database gets no pool, and its build cannot reach one', async () => {
    const definition = defineService({
      name: 'kitnodb',
      config,
      database: false,
      async build(ctx) {
        assert.throws(() => ctx.pool, /keeps no database/);
        return ctx.httpApp({ title: 'no db', errorBody: statusEnvelope, readiness: async () => {} });
      },
    });
    const running = await startService(definition, { env: env() });
    assert.equal(running.pool, undefined);
    assert.equal((await running.app.inject('/readyz')).statusCode, 200);
    await running.close();
  });

  test('without a database for a service that needs one, the start says which variable to set', async () => {
    const definition = defineService({
      name: 'kitnourl',
      config,
      build: async (ctx) => ctx.httpApp({ title: 'x', errorBody: statusEnvelope }),
    });
    await assert.rejects(startService(definition, { env: env() }), /kitnourl needs a database: set DATABASE_URL/);
  });

  test('a pool given by the caller is used as it is, not migrated and left open', async () => {
    const pool = createPool(`postgres://postgres@127.0.0.1:${await closedPort()}/none`, { max: 1 });
    const definition = defineService({
      name: 'kitgiven',
      config,
      build: async (ctx) => ctx.httpApp({ title: 'x', errorBody: statusEnvelope }),
    });
    const running = await startService(definition, { env: env(), pool });
    assert.equal((await running.app.inject('/readyz')).statusCode, 503, 'readiness asks the given pool');
    await running.close();
    await pool.end();
  });

  test('counters by prefix live in Redis under the service name, shared by two instances', { skip: withoutRedis }, async () => {
    const logs = new LogCapture();
    const key = randomUUID();
    const definition = defineService({
      name: 'kitcounters',
      config,
      async build({ httpApp, counters }) {
        const app = await httpApp({ title: 'x', errorBody: statusEnvelope });
        const store = counters('demo');
        app.get('/hit', async () => ({ count: (await store.hit(key, 60_000)).count }));
        return app;
      },
    });
    const start = () =>
      startService(definition, { env: env({ DATABASE_URL: db.url, REDIS_URL: process.env.REDIS_URL! }), logStream: logs });
    const [one, two] = await Promise.all([start(), start()]);
    try {
      const a = (await one.app.inject('/hit')).json() as { count: number };
      const b = (await two.app.inject('/hit')).json() as { count: number };
      assert.deepEqual([a.count, b.count].sort(), [1, 2]);
    } finally {
      await one.close();
      await two.close();
    }
  });
});
