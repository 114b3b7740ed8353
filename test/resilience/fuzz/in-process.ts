// The four services built in this test process (buildApp / openIdp, real PostgreSQL, real HTTP
// listeners on 127.0.0.1), each with its log lines captured, for the property, JWT and SQL
// injection files. The fuzz and log-hygiene files run the real processes instead.
import { generateKeyPairSync } from 'node:crypto';
import { buildApp as buildAccounts } from '../../../src/accounts/app.js';
import { accountsConfig } from '../../../src/accounts/config.js';
import { openIdp } from '../../../src/idp/bootstrap.js';
import { idpConfig } from '../../../src/idp/config.js';
import { loadConfig } from '../../../src/kit/config.js';
import { createPool, type Pool } from '../../../src/kit/db.js';
import type { App } from '../../../src/kit/http.js';
import { buildApp as buildNotes, type NotesDeps } from '../../../src/notes/app.js';
import { notesConfig } from '../../../src/notes/config.js';
import { buildApp as buildShortener } from '../../../src/shortener/app.js';
import { shortenerConfig } from '../../../src/shortener/config.js';
import type { TestDatabase } from '../../helpers/database.js';
import { LogCapture } from '../../helpers/logs.js';
import { RELAXED_RATE_LIMITS, idpDatabase } from '../../helpers/idp.js';
import { serviceDatabase } from '../helpers/services.js';

export interface Running {
  url: string;
  app: App;
  logs: LogCapture;
  close(): Promise<void>;
}

async function listen(app: App): Promise<string> {
  return app.listen({ port: 0, host: '127.0.0.1' });
}

/** TRUST_PROXY=127.0.0.1: tests name the client in X-Forwarded-For, so the create limit counts per test client. */
/** The shortener's admin key in the in-process runs, so the admin routes are reached past authentication. */
export const SHORTENER_ADMIN_KEY = `hostile-admin-${'k3y'.repeat(12)}`;

export async function startShortenerInProcess(logLevel = 'silent'): Promise<Running & { pool: Pool; db: TestDatabase }> {
  const db = await serviceDatabase('shortener');
  const pool = createPool(db.url, { max: 5 });
  const logs = new LogCapture();
  const config = loadConfig(shortenerConfig, {
    BASE_URL: 'https://sho.rt',
    LOG_LEVEL: logLevel,
    TRUST_PROXY: '127.0.0.1',
    SHORTENER_ADMIN_KEY,
  });
  const app = await buildShortener(config, { pool, logStream: logs });
  const url = await listen(app);
  return {
    url,
    app,
    logs,
    pool,
    db,
    close: async () => {
      await app.close();
      await pool.end();
      await db.drop();
    },
  };
}

export const ACCOUNTS_SECRET = `hostile-${'s3cr3t'.repeat(8)}`;

export async function startAccountsInProcess(logLevel = 'silent'): Promise<Running & { pool: Pool; db: TestDatabase; secret: string }> {
  const db = await serviceDatabase('accounts');
  const pool = createPool(db.url, { max: 5 });
  const logs = new LogCapture();
  // The fuzz registers from one address far more often than the per-IP limit allows.
  const config = loadConfig(accountsConfig, { JWT_SECRET: ACCOUNTS_SECRET, LOG_LEVEL: logLevel, REGISTER_MAX_PER_IP: '1000000' });
  const app = await buildAccounts(config, { pool, logStream: logs });
  const url = await listen(app);
  return {
    url,
    app,
    logs,
    pool,
    db,
    secret: ACCOUNTS_SECRET,
    close: async () => {
      await app.close();
      await pool.end();
      await db.drop();
    },
  };
}

export const HOSTILE_IDP_KEYS = {
  publishable: 'sb_publishable_hostile_Zq4mW8xN2cT6vB1k',
  secret: 'sb_secret_hostile_P9dL3sH7fJ1gK5aQ',
};

export interface RunningIdp extends Running {
  databaseUrl: string;
  db: TestDatabase;
  publishableKey: string;
  secretKey: string;
  /** The ES256 private key the idp signs with (PEM), so tests can sign valid-but-wrong tokens. */
  signingKeyPem: string;
}

export async function startIdpInProcess(logLevel = 'silent'): Promise<RunningIdp> {
  const db = await idpDatabase();
  const signingKeyPem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const config = loadConfig(idpConfig, {
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: db.url,
    LOG_LEVEL: logLevel,
    IDP_PUBLISHABLE_KEY: HOSTILE_IDP_KEYS.publishable,
    IDP_SECRET_KEY: HOSTILE_IDP_KEYS.secret,
    IDP_AUTOCONFIRM: 'true',
    IDP_SIGNING_KEY: signingKeyPem,
    ...RELAXED_RATE_LIMITS,
  });
  const logs = new LogCapture();
  let idp: Awaited<ReturnType<typeof openIdp>>;
  try {
    idp = await openIdp(config, { databaseUrl: db.url, logStream: logs });
  } catch (err) {
    await db.drop().catch(() => {});
    throw err;
  }
  const url = await listen(idp.app);
  return {
    url,
    app: idp.app,
    logs,
    db,
    databaseUrl: db.url,
    publishableKey: HOSTILE_IDP_KEYS.publishable,
    secretKey: HOSTILE_IDP_KEYS.secret,
    signingKeyPem,
    close: async () => {
      await idp.app.close();
      await idp.close();
      await db.drop();
    },
  };
}

export async function startNotesInProcess(
  idp: { url: string; publishableKey: string; secretKey: string },
  opts: { verify?: 'remote' | 'local'; logLevel?: string; fetch?: NotesDeps['fetch'] } = {},
): Promise<Running> {
  const config = loadConfig(notesConfig, {
    IDP_URL: idp.url,
    IDP_PUBLISHABLE_KEY: idp.publishableKey,
    IDP_SECRET_KEY: idp.secretKey,
    IDP_VERIFY: opts.verify ?? 'remote',
    LOG_LEVEL: opts.logLevel ?? 'silent',
  });
  const logs = new LogCapture();
  const app = await buildNotes(config, { logStream: logs, ...(opts.fetch ? { fetch: opts.fetch } : {}) });
  const url = await listen(app);
  return { url, app, logs, close: () => app.close() };
}
