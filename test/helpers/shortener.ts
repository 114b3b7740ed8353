import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/kit/config.js';
import { type Migration, type Pool, readMigrations } from '../../src/kit/db.js';
import type { App } from '../../src/kit/http/app.js';
import { type ShortenerDeps, shortener } from '../../src/shortener/app.js';
import { type ShortenerConfig, shortenerConfig } from '../../src/shortener/config.js';
import type { TestDatabase } from './database.js';
import { assertStatusEnvelope } from './envelope.js';
import { type TestService, type TestServiceOptions, serviceDatabase, started, startTestService, withPool } from './services.js';
import { uniqueIp } from './client-ips.js';
import { testLogLevel } from './logs.js';
import { responseCheckEnv } from './response-check.js';

export const SHORTENER_MIGRATIONS_DIR = fileURLToPath(new URL('../../src/shortener/migrations', import.meta.url));

export const shortenerMigrations = (): Promise<Migration[]> => readMigrations(SHORTENER_MIGRATIONS_DIR);

/** An admin key (SHORTENER_ADMIN_KEY) for tests that reach the admin routes. */
export const TEST_ADMIN_KEY = `test-admin-${'k3y'.repeat(12)}`;

/** A fresh shortener database of the test run, migrated. */
export function shortenerDatabase(): Promise<TestDatabase> {
  return serviceDatabase(shortener, SHORTENER_TEST_ENV);
}

/** The variables every test shortener starts with. */
export const SHORTENER_TEST_ENV = { BASE_URL: 'https://sho.rt', LOG_LEVEL: testLogLevel('silent') };

/** Configuration as the process would load it (so BASE_URL goes through the same parsing). */
export function shortenerTestConfig(env: Record<string, string> = {}): ShortenerConfig {
  return loadConfig(shortenerConfig, { ...SHORTENER_TEST_ENV, ...responseCheckEnv(), ...env });
}

export type ShortenerOptions = TestServiceOptions<ShortenerDeps>;
export type RunningShortener = TestService<ShortenerConfig> & { pool: Pool };

/** The shortener for a test. Without a `pool` or `databaseUrl` it gets a database of its own. */
export async function startShortener(options: ShortenerOptions = {}): Promise<RunningShortener> {
  return withPool(await startTestService(shortener, SHORTENER_TEST_ENV, options));
}

/**
 * A shortener shared by the tests of a file (or of the describe it is called in), on a database of its
 * own: started before those tests, then `setUp` (the scene they share; not a before hook of the file,
 * which node would run beside this one), closed after them.
 */
export interface SharedShortener {
  readonly app: App;
  readonly pool: Pool;
}

export function sharedShortener(options: ShortenerOptions = {}, setUp?: (shared: SharedShortener) => Promise<void>): SharedShortener {
  let running: RunningShortener | undefined;
  before(async () => {
    running = await startShortener(options);
    await setUp?.(shared);
  });
  after(async () => {
    await running?.close();
  });
  const shared: SharedShortener = {
    get app() {
      return started(running).app;
    },
    get pool() {
      return started(running).pool;
    },
  };
  return shared;
}

/** Runs `fn` against a shortener started for it, closed afterwards. */
export async function withShortener<T>(options: ShortenerOptions, fn: (app: App, shortener: RunningShortener) => Promise<T>): Promise<T> {
  const running = await startShortener(options);
  try {
    return await fn(running.app, running);
  } finally {
    await running.close();
  }
}

/**
 * A code generator (the `generateCode` option) that draws `codes` in turn, then the last one again
 * and again, keeping every draw in `drawn`.
 */
export function scriptedCodes(...codes: string[]): { generateCode: () => string; drawn: string[] } {
  const drawn: string[] = [];
  return {
    drawn,
    generateCode: () => {
      const code = codes[Math.min(drawn.length, codes.length - 1)]!;
      drawn.push(code);
      return code;
    },
  };
}

export interface CreateResult {
  status: number;
  headers: Record<string, unknown>;
  body: Record<string, unknown>;
}

export async function createLink(app: App, url: unknown, ip = uniqueIp()): Promise<CreateResult> {
  const res = await app.inject({ method: 'POST', url: '/api/links', payload: { url }, remoteAddress: ip });
  return { status: res.statusCode, headers: res.headers, body: res.json() as Record<string, unknown> };
}

/** POST /api/links with `body` sent as it is, from an address of its own. */
export function postLinkBody(app: App, body: string, contentType = 'application/json') {
  return app.inject({
    method: 'POST',
    url: '/api/links',
    headers: { 'content-type': contentType },
    payload: body,
    remoteAddress: uniqueIp(),
  });
}

/** Creates a link and returns its code, failing loudly if creation did not succeed. */
export async function createCode(app: App, url = 'https://example.com/some/page'): Promise<string> {
  const res = await createLink(app, url);
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body.data as { code: string }).code;
}

export async function countLinks(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links');
  return rows[0]!.n;
}

export async function clicksOf(pool: Pool, code: string): Promise<number | undefined> {
  const { rows } = await pool.query<{ clicks: number }>('SELECT clicks FROM links WHERE code = $1', [code]);
  return rows[0]?.clicks;
}

/** The error envelope of the shortener, checked strictly: exactly these three keys. Returns the message. */
export function assertEnvelope(body: unknown, status: number, response: string): string {
  return assertStatusEnvelope(body, status, { response });
}

/** The Authorization header of TEST_ADMIN_KEY, which manages every link (visit detail included). */
export const TEST_ADMIN_AUTH = { authorization: `Bearer ${TEST_ADMIN_KEY}` };

/** An API key issued by the admin (`POST /api/admin/keys`), as its holder receives it once. */
export async function issueApiKey(app: App, name: string, role: 'author' | 'manager'): Promise<{ id: number; key: string }> {
  const res = await app.inject({ method: 'POST', url: '/api/admin/keys', payload: { name, role }, headers: TEST_ADMIN_AUTH });
  if (res.statusCode !== 201) throw new Error(`issuing an API key answered ${res.statusCode}: ${res.body}`);
  const data = (res.json() as { data: { id: number; key: string } }).data;
  return { id: data.id, key: data.key };
}
