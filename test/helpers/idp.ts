// A real idp for tests: its own freshly migrated database, real HTTP on a free port, fixed keys.
// Used by the idp's own tests and by the notes service's tests.
import { generateKeyPairSync } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { type Clock, systemClock } from '../../src/kit/clock.js';
import { loadConfig } from '../../src/kit/config.js';
import { createPool, migrate, readMigrations } from '../../src/kit/db.js';
import type { PasswordHasher } from '../../src/kit/password-hasher.js';
import { authenticatorRoleName } from '../../src/idp/authenticator.js';
import { openIdp } from '../../src/idp/bootstrap.js';
import { idpConfig } from '../../src/idp/config.js';
import { adminUrl, freshDatabase, type TestDatabase, withClient } from './database.js';
import { http } from './http.js';
import { freePort } from './ports.js';
import { LogCapture, testLogLevel } from './logs.js';
import { responseCheckEnv } from './response-check.js';
import type { App } from '../../src/kit/http.js';

export interface RunningIdp {
  url: string;
  app: App;
  publishableKey: string;
  secretKey: string;
  /** The ES256 private key it signs with (PEM), so tests can sign valid-but-wrong tokens. */
  signingKeyPem: string;
  databaseUrl: string;
  /** Every line it logs (silent unless `env` sets LOG_LEVEL). */
  logs: LogCapture;
  close(): Promise<void>;
}

export const TEST_PUBLISHABLE_KEY = 'sb_publishable_test_5mLcH2pQ8vRzN4kW1xYa';
export const TEST_SECRET_KEY = 'sb_secret_test_Q7nB3vT9cXe2LmP5sK8d';

/** One ES256 key per test process, so tests can forge tokens signed with the idp's own key. */
export const TEST_SIGNING_KEY: string = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  .privateKey.export({ type: 'pkcs8', format: 'pem' })
  .toString();

/**
 * Rate limits high enough for suites that sign up and sign in many users from 127.0.0.1; the
 * rate-limit tests set their own low ones.
 */
export const RELAXED_RATE_LIMITS = {
  IDP_RATE_LIMIT_TOKEN_REFRESH: '1000000',
  IDP_RATE_LIMIT_OTP: '1000000',
  IDP_RATE_LIMIT_EMAIL_SENT: '1000000',
  IDP_RATE_LIMIT_LOGIN_FAILURES: '1000000',
  IDP_RATE_LIMIT_VERIFY: '1000000',
};

const idpMigrationsDir = fileURLToPath(new URL('../../src/idp/migrations', import.meta.url));
const appMigrationsDir = fileURLToPath(new URL('../../supabase/migrations', import.meta.url));

export interface IdpOptions {
  autoconfirm?: boolean;
  jwtExpirySeconds?: number;
  clock?: Clock;
  /** Variables on top of the test defaults, read as the process reads them. */
  env?: Record<string, string>;
  passwordHasher?: PasswordHasher;
  /** A database to start on (another instance's, or one a test prepared), left in place by close. */
  databaseUrl?: string;
}

/**
 * The idp built in the test process, listening on 127.0.0.1 (a free port): the one way tests make
 * one. Without `databaseUrl` it gets a database of its own.
 */
export async function startIdp(opts: IdpOptions = {}): Promise<RunningIdp> {
  const db = opts.databaseUrl === undefined ? await idpDatabase() : undefined;
  const databaseUrl = opts.databaseUrl ?? db!.url;
  // Its port is known before it starts, so IDP_SITE_URL (the token issuer, and the origin of the
  // links in its mails) is where it really listens: a test can open a mailed link as it comes.
  const port = await freePort();
  const config = loadConfig(idpConfig, {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: testLogLevel('silent'),
    IDP_PUBLISHABLE_KEY: TEST_PUBLISHABLE_KEY,
    IDP_SECRET_KEY: TEST_SECRET_KEY,
    IDP_AUTOCONFIRM: String(opts.autoconfirm ?? true),
    IDP_JWT_EXPIRY: String(opts.jwtExpirySeconds ?? 3600),
    IDP_SIGNING_KEY: TEST_SIGNING_KEY,
    ...RELAXED_RATE_LIMITS,
    ...responseCheckEnv(),
    ...opts.env,
  });
  const logs = new LogCapture();
  let idp: Awaited<ReturnType<typeof openIdp>>;
  try {
    idp = await openIdp(config, { databaseUrl, clock: opts.clock ?? systemClock, logStream: logs, passwordHasher: opts.passwordHasher });
  } catch (err) {
    await db?.drop().catch(() => {});
    throw err;
  }
  const url = await idp.app.listen({ port, host: '127.0.0.1' });
  return {
    url,
    app: idp.app,
    publishableKey: TEST_PUBLISHABLE_KEY,
    secretKey: TEST_SECRET_KEY,
    signingKeyPem: TEST_SIGNING_KEY,
    databaseUrl,
    logs,
    async close() {
      await idp.app.close();
      await idp.close();
      await db?.drop();
    },
  };
}

/**
 * A fresh idp database of the test run. The template gets both migration sets under their own
 * scopes (as the idp applies them at start), so each database is a plain clone and the idp's
 * start finds nothing to do; drop() also removes the cluster-wide login role the idp creates.
 */
export async function idpDatabase(): Promise<TestDatabase> {
  const idpMigrations = await readMigrations(idpMigrationsDir);
  const appMigrations = await readMigrations(appMigrationsDir);
  const db = await freshDatabase('idp', idpMigrations, async (url) => {
    const pool = createPool(url, { max: 1 });
    try {
      await migrate(pool, 'idp', idpMigrations);
      await migrate(pool, 'supabase', appMigrations);
    } finally {
      await pool.end();
    }
  });
  return { ...db, drop: () => dropIdpDatabase(db) };
}

/** Drops an idp test database and its login role, which is cluster-wide and would otherwise stay behind. */
export async function dropIdpDatabase(db: TestDatabase): Promise<void> {
  await db.drop();
  await withClient(adminUrl(), (admin) => admin.query(`DROP ROLE IF EXISTS ${admin.escapeIdentifier(authenticatorRoleName(db.name))}`));
}

// ---- the idp's own tests: raw HTTP ------------------------------------------------------------

/** Signs a user in through the token endpoint and returns the session body. */
export async function signIn(idp: RunningIdp, email: string, password: string): Promise<{ access_token: string; refresh_token: string; user: { id: string } }> {
  const res = await http(idp, '/auth/v1/token?grant_type=password', { method: 'POST', body: { email, password } });
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${res.text}`);
  return res.json as { access_token: string; refresh_token: string; user: { id: string } };
}

/** A confirmed user made with the secret key; returns its id and a session. */
export async function createUser(idp: RunningIdp, email: string, password = 'correct-horse-1') {
  const res = await http(idp, '/auth/v1/admin/users', {
    method: 'POST',
    apikey: idp.secretKey,
    body: { email, password, email_confirm: true },
  });
  if (res.status !== 200) throw new Error(`admin create failed: ${res.status} ${res.text}`);
  const session = await signIn(idp, email, password);
  return { id: (res.json as { id: string }).id, token: session.access_token, refreshToken: session.refresh_token, email, password };
}

export function decodeJwtPart(token: string, index: 0 | 1): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[index]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}
