import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { TestDatabase } from './helpers/database.js';
import { shortenerDatabase } from './helpers/shortener.js';
import { freePort } from './helpers/ports.js';
import { spawnEntry } from './helpers/process.js';

// The real process: `node --import tsx src/shortener/server.ts`, configured by its environment only.

let db: TestDatabase;

before(async () => {
  db = await shortenerDatabase();
});

after(async () => {
  await db.drop();
});

function serverEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['PORT', 'HOST', 'BASE_URL', 'REDIS_URL', 'TRUST_PROXY', 'LOG_LEVEL', 'DATA_DIR']) delete env[name];
  return { ...env, DATABASE_URL: db.url, ...extra };
}

const startServer = (env: Record<string, string>) => spawnEntry('src/shortener/server.ts', serverEnv(env));

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function waitFor(condition: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('configuration errors stop the process', { concurrency: true }, () => {
  const cases: Array<[Record<string, string>, RegExp[]]> = [
    [{ BASE_URL: 'ftp://x' }, [/^config error: BASE_URL .*http/m]],
    [{ PORT: 'abc' }, [/^config error: PORT .*whole number/m]],
    [
      { BASE_URL: 'not a url', PORT: '99999', LOG_LEVEL: 'loud' },
      [/^config error: BASE_URL/m, /^config error: PORT/m, /^config error: LOG_LEVEL/m],
    ],
    [{ REDIS_URL: 'http://127.0.0.1:6379' }, [/^config error: REDIS_URL must start with redis:\/\/ or rediss:\/\//m]],
  ];
  for (const [env, lines] of cases) {
    it(`exits 1 naming the variable: ${JSON.stringify(env)}`, async () => {
      const server = startServer({ ...env, LOG_LEVEL: env.LOG_LEVEL ?? 'info' });
      const code = await withTimeout(server.exited, 30_000, 'server exit');
      assert.equal(code, 1, server.stderr());
      for (const line of lines) assert.match(server.stderr(), line);
      assert.equal(server.stderr().trim().split('\n').length, lines.length, server.stderr());
      assert.doesNotMatch(server.stdout(), /listening/);
    });
  }
});

describe('graceful shutdown', () => {
  it('SIGTERM lets every accepted redirect finish with a 302, counts each click, and exits 0', async () => {
    const code = 'Drain01';
    const admin = new pg.Pool({ connectionString: db.url, max: 2 });
    const port = await freePort();
    // debug: a request's incoming line (written when it reaches the server) shows it arrived.
    const server = startServer({ PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'debug' });
    const lockHolder = new pg.Client({ connectionString: db.url });
    // The forced DROP DATABASE of `after` terminates these connections; that is expected, and an
    // unheard 'error' event would fail whichever test runs at that moment.
    admin.on('error', () => {});
    lockHolder.on('error', () => {});
    const agent = new http.Agent({ keepAlive: true });
    try {
      await admin.query('INSERT INTO links (code, original_url) VALUES ($1, $2) ON CONFLICT DO NOTHING', [
        code,
        'https://example.com/drain',
      ]);
      await waitFor(() => /listening on/.test(server.stdout()), 30_000, `the server to listen (stderr: ${server.stderr()})`);

      // Hold the link's row so the click UPDATE blocks: the redirects are then provably in flight.
      await lockHolder.connect();
      await lockHolder.query('BEGIN');
      await lockHolder.query('SELECT 1 FROM links WHERE code = $1 FOR UPDATE', [code]);

      let sent = 0;
      const results = Array.from(
        { length: 50 },
        () =>
          new Promise<number | string>((resolve) => {
            const req = http.get({ host: '127.0.0.1', port, path: `/${code}`, agent }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
              res.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
            });
            req.on('finish', () => (sent += 1));
            req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
          }),
      );
      await waitFor(() => sent === 50, 10_000, 'all 50 requests to be written');
      await waitFor(
        async () => {
          const { rows } = await admin.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH batch AS%'",
          );
          return rows[0].n > 0;
        },
        10_000,
        'the click UPDATE to wait on the row lock',
      );
      // Every request has reached a handler before the signal (the server logs each one at debug).
      await waitFor(
        () => (server.stdout().match(/"msg":"incoming request"/g) ?? []).length === 50,
        15_000,
        'the server to receive all 50 requests',
      );

      server.child.kill('SIGTERM');
      await waitFor(() => /SIGTERM: draining/.test(server.stdout()), 10_000, 'the server to start draining');
      // Draining: still alive while requests are in flight, but no longer accepting connections.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(server.child.exitCode, null, 'exited before in-flight requests finished');
      const late = await new Promise<string | number>((resolve) => {
        const req = http.get({ host: '127.0.0.1', port, path: `/${code}`, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      });
      assert.notEqual(late, 302, 'a connection made after SIGTERM must not be served');

      await lockHolder.query('COMMIT');
      const statuses = await withTimeout(Promise.all(results), 15_000, 'in-flight responses');
      const exit = await withTimeout(server.exited, 25_000, 'server exit');

      assert.deepEqual(statuses, Array(50).fill(302), `statuses: ${statuses.join(',')}`);
      assert.deepEqual({ code: exit, signal: server.child.signalCode }, { code: 0, signal: null }, server.stdout() + server.stderr());
      const { rows } = await admin.query('SELECT clicks FROM links WHERE code = $1', [code]);
      assert.equal(rows[0].clicks, statuses.filter((s) => s === 302).length);
      const visits = await admin.query('SELECT coalesce(sum(visits), 0)::int AS n FROM visit_counts WHERE code = $1', [code]);
      assert.equal(visits.rows[0].n, rows[0].clicks);
      assert.match(server.stdout(), /"msg":"stopped"/);
    } finally {
      agent.destroy();
      await lockHolder.query('ROLLBACK').catch(() => {});
      await lockHolder.end().catch(() => {});
      await admin.end();
      if (server.child.exitCode === null && server.child.signalCode === null) {
        server.child.kill('SIGKILL');
        await server.exited;
      }
    }
  });
});
