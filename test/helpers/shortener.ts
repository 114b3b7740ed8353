import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/kit/config.js';
import { type Migration, type Pool, readMigrations } from '../../src/kit/db.js';
import type { App } from '../../src/kit/http.js';
import { type ShortenerConfig, shortenerConfig } from '../../src/shortener/config.js';
import { testLogLevel } from './logs.js';

export const SHORTENER_MIGRATIONS_DIR = fileURLToPath(new URL('../../src/shortener/migrations', import.meta.url));

export const shortenerMigrations = (): Promise<Migration[]> => readMigrations(SHORTENER_MIGRATIONS_DIR);

/** Configuration as the process would load it (so BASE_URL goes through the same parsing). */
export function shortenerTestConfig(env: Record<string, string> = {}): ShortenerConfig {
  return loadConfig(shortenerConfig, { BASE_URL: 'https://sho.rt', LOG_LEVEL: testLogLevel('silent'), ...env });
}

/** A client address no other request of the file uses, so the create limit never gets in the way. */
let nextIp = 0;
export function uniqueIp(): string {
  nextIp += 1;
  return `10.${(nextIp >> 16) & 255}.${(nextIp >> 8) & 255}.${nextIp & 255}`;
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
  const b = body as Record<string, unknown>;
  assert.deepEqual(Object.keys(b).sort(), ['message', 'response', 'status'], `not an envelope: ${JSON.stringify(b)}`);
  assert.equal(b.status, status);
  assert.equal(b.response, response);
  assert.equal(typeof b.message, 'string');
  assert.ok((b.message as string).length > 0, 'empty message');
  return b.message as string;
}
