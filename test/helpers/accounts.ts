// The accounts service in tests: its factory (startAccounts), and for the
// test/accounts-*.test.ts files one fresh database per file, with every
// response body any app of the file sends collected, so each file can assert
// that no body ever carries a password hash.
import { emailDigester } from '../../src/accounts/login-throttle.js';
import { DEFAULT_IPV6_PREFIX, DEFAULT_IPV6_WIDE_PREFIX } from '../../src/kit/http/client-ip.js';
import { loginFailureKeys } from '../../src/kit/login-throttle.js';
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { InjectOptions } from 'fastify';
import { loadConfig } from '../../src/kit/config.js';
import { type Pool, createPool } from '../../src/kit/db.js';
import type { App } from '../../src/kit/http/app.js';
import { type AccountsDeps, accounts } from '../../src/accounts/app.js';
import { type AccountsConfig, accountsConfig } from '../../src/accounts/config.js';
import type { PublicUser } from '../../src/accounts/repository.js';
import type { TestDatabase } from './database.js';
import { assertStatusEnvelope } from './envelope.js';
import { testLogLevel } from './logs.js';
import { testPasswordHasher } from './passwords.js';
import { type TestService, type TestServiceOptions, serviceDatabase, startTestService, withPool } from './services.js';
import { responseCheckEnv } from './response-check.js';

export const TEST_SECRET = 'test-secret-0123456789-abcdefghijklmnopqrstuvwxyz';

/**
 * The variables every test accounts service starts with: no pruning behind a test's back (it would
 * add statements to those that count them); the pruning tests turn it on.
 */
export const ACCOUNTS_TEST_ENV = { JWT_SECRET: TEST_SECRET, LOG_LEVEL: testLogLevel('silent'), PRUNE_INTERVAL: '0' };

/** Configuration as the process would load it with the test defaults. */
export function testConfig(env: Record<string, string> = {}): AccountsConfig {
  return loadConfig(accountsConfig, { ...ACCOUNTS_TEST_ENV, ...responseCheckEnv(), ...env });
}

/** A fresh accounts database of the test run, migrated. */
export function accountsDatabase(): Promise<TestDatabase> {
  return serviceDatabase(accounts, ACCOUNTS_TEST_ENV);
}

export type AccountsOptions = TestServiceOptions<AccountsDeps>;
export type RunningAccounts = TestService<AccountsConfig> & { pool: Pool };

/** The accounts service for a test. Without a `pool` or `databaseUrl` it gets a database of its own. */
export async function startAccounts(options: AccountsOptions = {}): Promise<RunningAccounts> {
  const deps = { passwordHasher: testPasswordHasher(), ...options.deps };
  return withPool(await startTestService(accounts, ACCOUNTS_TEST_ENV, { ...options, deps }));
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
      const { app } = await startAccounts({ pool, ...options, env });
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

export { bearer } from './http.js';

/** The error envelope every failure uses. */
export function assertError(res: Response, status: number, message: string | RegExp): void {
  assert.equal(res.statusCode, status, res.body);
  assertStatusEnvelope(res.json(), status, { message });
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

/** The login throttle's counter keys of an email and a client address, as an accounts service of the tests names them. */
export function accountsLoginKeys(email: string, ip: string) {
  return loginFailureKeys(emailDigester(TEST_SECRET)(email), ip, { prefix: DEFAULT_IPV6_PREFIX, widePrefix: DEFAULT_IPV6_WIDE_PREFIX });
}
