// A real idp for tests: its own freshly migrated database, real HTTP on a free port, fixed keys.
// Used by the idp's own tests and by the notes service's tests.
import { generateKeyPairSync } from 'node:crypto';
import { after, before } from 'node:test';
import pg from 'pg';
import { type IdpDeps, idp } from '../../src/idp/app.js';
import { authenticatorRoleName } from '../../src/idp/authenticator.js';
import type { IdpConfig } from '../../src/idp/config.js';
import { type TestDatabase, adminUrl, withClient } from './database.js';
import { idpRequest } from './http.js';
import { testLogLevel } from './logs.js';
import { testPasswordHasher } from './passwords.js';
import { type TestService, type TestServiceOptions, serviceDatabase, started, startTestService } from './services.js';

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
  IDP_RATE_LIMIT_PASSWORD_UPDATES_PER_IP: '1000000',
};

/** The variables every test idp starts with. */
export const IDP_TEST_ENV = {
  LOG_LEVEL: testLogLevel('silent'),
  IDP_PUBLISHABLE_KEY: TEST_PUBLISHABLE_KEY,
  IDP_SECRET_KEY: TEST_SECRET_KEY,
  IDP_AUTOCONFIRM: 'true',
  IDP_JWT_EXPIRY: '3600',
  IDP_SIGNING_KEY: TEST_SIGNING_KEY,
  ...RELAXED_RATE_LIMITS,
};

export type IdpOptions = TestServiceOptions<IdpDeps>;

/** A running test idp, with what clients need to reach it. */
export type RunningIdp = TestService<IdpConfig> & {
  publishableKey: string;
  secretKey: string;
  /** The ES256 private key it signs with (PEM), so tests can sign valid-but-wrong tokens. */
  signingKeyPem: string;
};

/**
 * The idp for a test, listening on 127.0.0.1 (a free port known before it starts, so IDP_SITE_URL, the
 * token issuer and the origin of the links in its mails, is where it really listens). Without
 * `databaseUrl` it gets a database of its own.
 */
export async function startIdp(options: IdpOptions = {}): Promise<RunningIdp> {
  const deps = { passwordHasher: testPasswordHasher(), ...options.deps };
  const running = await startTestService(idp, IDP_TEST_ENV, { listen: true, ...options, deps }, () => idpDatabase());
  return { ...running, publishableKey: TEST_PUBLISHABLE_KEY, secretKey: TEST_SECRET_KEY, signingKeyPem: TEST_SIGNING_KEY };
}

/**
 * An idp shared by the tests of a file (or of the describe it is called in) and a connection to its
 * database (for tables, grants and checks past RLS): started before those tests, then `setUp` (the
 * scene they share), closed after them. The scene goes in `setUp` rather than in a before hook of the
 * file: node runs a file's top-level before hooks side by side, not one after the other.
 */
export interface SharedIdp {
  readonly idp: RunningIdp;
  readonly db: pg.Client;
}

export function sharedIdp(options: IdpOptions = {}, setUp?: (shared: SharedIdp) => Promise<void>): SharedIdp {
  let running: RunningIdp | undefined;
  let db: pg.Client | undefined;
  before(async () => {
    running = await startIdp(options);
    const client = new pg.Client({ connectionString: running.databaseUrl });
    await client.connect();
    db = client;
    await setUp?.(shared);
  });
  after(async () => {
    await db?.end();
    await running?.close();
  });
  const shared: SharedIdp = {
    get idp() {
      return started(running);
    },
    get db() {
      return started(db);
    },
  };
  return shared;
}

/**
 * A fresh idp database of the test run (a clone of a template with the idp's migration sets); drop()
 * also removes the cluster-wide login role the idp creates.
 */
export async function idpDatabase(): Promise<TestDatabase> {
  const db = await serviceDatabase(idp, IDP_TEST_ENV);
  return { ...db, drop: () => dropIdpDatabase(db) };
}

/** Drops an idp test database and its login role, which is cluster-wide and would otherwise stay behind. */
export async function dropIdpDatabase(db: TestDatabase): Promise<void> {
  await db.drop();
  await withClient(adminUrl(), (admin) => admin.query(`DROP ROLE IF EXISTS ${admin.escapeIdentifier(authenticatorRoleName(db.name))}`));
}

// ---- the idp's own tests: raw HTTP ------------------------------------------------------------

/** Signs a user in through the token endpoint and returns the session body. */
export async function signIn(
  idp: RunningIdp,
  email: string,
  password: string,
): Promise<{ access_token: string; refresh_token: string; user: { id: string } }> {
  const res = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email, password } });
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${res.text}`);
  return res.body as { access_token: string; refresh_token: string; user: { id: string } };
}

/** A confirmed user made with the secret key; returns its id and a session. */
export async function createUser(idp: RunningIdp, email: string, password = 'correct-horse-1') {
  const res = await idpRequest(idp, 'POST', '/auth/v1/admin/users', {
    apikey: idp.secretKey,
    body: { email, password, email_confirm: true },
  });
  if (res.status !== 200) throw new Error(`admin create failed: ${res.status} ${res.text}`);
  const session = await signIn(idp, email, password);
  return { id: (res.body as { id: string }).id, token: session.access_token, refreshToken: session.refresh_token, email, password };
}
