// The accounts service in tests: its factory (buildAccounts), and for the
// test/accounts-*.test.ts files one fresh database per file, with every
// response body any app of the file sends collected, so each file can assert
// that no body ever carries a password hash.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { InjectOptions } from 'fastify';
import { loadConfig } from '../../src/kit/config.js';
import { type Pool, createPool, readMigrations } from '../../src/kit/db.js';
import type { App } from '../../src/kit/http.js';
import { type AccountsDeps, buildApp } from '../../src/accounts/app.js';
import { type AccountsConfig, accountsConfig } from '../../src/accounts/config.js';
import type { PublicUser } from '../../src/accounts/repository.js';
import { type TestDatabase, freshDatabase } from './database.js';
import { type InProcessService, inProcessService } from './in-process.js';
import { LogCapture, testLogLevel } from './logs.js';
import { responseCheckEnv } from './response-check.js';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../src/accounts/migrations', import.meta.url));
export const TEST_SECRET = 'test-secret-0123456789-abcdefghijklmnopqrstuvwxyz';

/**
 * Every test registers from 127.0.0.1, so the per-IP registration limit is
 * lifted unless a test sets REGISTER_MAX_PER_IP itself.
 */
export function testConfig(env: Record<string, string> = {}): AccountsConfig {
  // No pruning behind a test's back (it would add statements to those that count them);
  // the pruning tests turn it on.
  return loadConfig(accountsConfig, { JWT_SECRET: TEST_SECRET, LOG_LEVEL: testLogLevel('silent'), REGISTER_MAX_PER_IP: '1000000', PRUNE_INTERVAL: '0', ...responseCheckEnv(), ...env });
}

/** A fresh accounts database of the test run, migrated. */
export async function accountsDatabase(): Promise<TestDatabase> {
  return freshDatabase('accounts', await readMigrations(MIGRATIONS_DIR));
}

export interface AccountsOptions extends Partial<Omit<AccountsDeps, 'logStream'>> {
  /** Variables on top of the test defaults, read as the process reads them. */
  env?: Record<string, string>;
  /** Where its log lines go; a new capture otherwise. */
  logs?: LogCapture;
  /** Also listen on 127.0.0.1 (a free port), for tests that speak real HTTP. */
  listen?: boolean;
}

export type RunningAccounts = InProcessService;

/**
 * The accounts service built in the test process: the one way tests make one. Without a `pool` it
 * gets a database of its own.
 */
export function buildAccounts({ env = {}, logs = new LogCapture(), listen = false, pool, ...deps }: AccountsOptions = {}): Promise<RunningAccounts> {
  return inProcessService({
    pool,
    database: accountsDatabase,
    listen,
    logs,
    build: (pool) => buildApp(testConfig(env), { ...deps, pool, logStream: logs }),
  });
}

/** Every body sent by an app of a suite, errors included. */
export const responseBodies: string[] = [];

export interface Suite {
  readonly db: TestDatabase;
  readonly pool: Pool;
  ready(): Promise<void>;
  /** A new app on this file's database (unless `options.pool` names another); closed after the file. */
  app(env?: Record<string, string>, options?: Omit<AccountsOptions, 'env'>): Promise<App>;
}

/** Registers the before/after hooks of a test file and returns its database and app factory. */
export function accountsSuite(): Suite {
  let db: TestDatabase | undefined;
  let pool: Pool | undefined;
  const apps: App[] = [];
  let setup: Promise<void> | undefined;
  // Lazy and shared: a file's own before() hooks may run before this one finishes.
  const init = () =>
    (setup ??= (async () => {
      db = await accountsDatabase();
      pool = createPool(db.url, { max: 10 });
    })());
  before(init);
  after(async () => {
    for (const app of apps) await app.close();
    await pool?.end();
    await db?.drop();
  });
  return {
    get db() {
      assert.ok(db, 'database not ready');
      return db;
    },
    get pool() {
      assert.ok(pool, 'database not ready');
      return pool;
    },
    ready: () => init(),
    async app(env = {}, options = {}) {
      await init();
      assert.ok(pool, 'database not ready');
      const { app } = await buildAccounts({ pool, ...options, env });
      app.addHook('onSend', async (_request, _reply, payload) => {
        if (typeof payload === 'string') responseBodies.push(payload);
        else if (Buffer.isBuffer(payload)) responseBodies.push(payload.toString('utf8'));
        return payload;
      });
      apps.push(app);
      return app;
    },
  };
}

export type Response = Awaited<ReturnType<App['inject']>>;

/** A request with a JSON body (when given). */
export function json(app: App, method: InjectOptions['method'], url: string, body?: unknown, headers: Record<string, string> = {}) {
  return app.inject({
    method,
    url,
    payload: body === undefined ? undefined : JSON.stringify(body),
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
  });
}

export async function registerUser(app: App, user: { name: string; email: string; password: string }): Promise<PublicUser> {
  const res = await json(app, 'POST', '/auth/register', user);
  assert.equal(res.statusCode, 201, res.body);
  return (res.json() as { data: PublicUser }).data;
}

export async function loginToken(app: App, email: string, password: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await json(app, 'POST', '/auth/login', { email, password }, headers);
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { data: { token: string } }).data.token;
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** The error envelope every failure uses. */
export function assertError(res: Response, status: number, message: string | RegExp): void {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['message', 'response', 'status']);
  assert.equal(body.status, status);
  assert.equal(typeof body.response, 'string');
  if (typeof message === 'string') assert.equal(body.message, message);
  else assert.match(String(body.message), message);
}

const HASH_PATTERN = /\$2[aby]\$/;

/** Declares, last in a file, the test that scans every body the file's apps sent. */
export function noSecretInAnyResponse(): void {
  test('no response body of this file carries a bcrypt hash or the word password_hash', () => {
    assert.ok(responseBodies.length > 0, 'no responses were collected');
    for (const body of responseBodies) {
      assert.doesNotMatch(body, HASH_PATTERN);
      assert.ok(!body.includes('password_hash'), `a body mentions password_hash: ${body.slice(0, 200)}`);
    }
  });
}
