import { randomBytes, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RELAXED_RATE_LIMITS } from '../../helpers/idp.js';
import { type ServiceProcess, startServiceProcess } from '../../helpers/process.js';

// The services as users run them (their own process, configured by environment
// only), with every variable the test does not set blanked out, so what CI
// exports for the test runner (DATABASE_URL, REDIS_URL) never leaks into them.

const BLANK = { DATABASE_URL: '', REDIS_URL: '', TRUST_PROXY: '', BASE_URL: '', NODE_OPTIONS: '' };

export interface ProcessOptions {
  /** Fixed port (to restart a service where clients expect it). */
  port?: number;
  /** Extra variables, e.g. NODE_OPTIONS for the soak's memory probe. */
  env?: Record<string, string>;
  /** The process's open-file limit (ulimit -n). */
  openFileLimit?: number;
}

export function startShortener(
  databaseUrl: string,
  opts: ProcessOptions & { redisUrl?: string; trustProxy?: string } = {},
): Promise<ServiceProcess> {
  return startServiceProcess(
    'src/shortener/server.ts',
    {
      ...BLANK,
      DATABASE_URL: databaseUrl,
      REDIS_URL: opts.redisUrl ?? '',
      TRUST_PROXY: opts.trustProxy ?? '',
      BASE_URL: 'https://sho.rt',
      ...opts.env,
    },
    { port: opts.port, openFileLimit: opts.openFileLimit },
  );
}

export const ACCOUNTS_ADMIN = { email: 'resilience-admin@example.com', password: 'resilience-admin-pw-1' };

export function startAccounts(databaseUrl: string, opts: ProcessOptions = {}): Promise<ServiceProcess> {
  return startServiceProcess(
    'src/accounts/server.ts',
    {
      ...BLANK,
      DATABASE_URL: databaseUrl,
      JWT_SECRET: randomBytes(32).toString('hex'),
      ADMIN_EMAIL: ACCOUNTS_ADMIN.email,
      ADMIN_PASSWORD: ACCOUNTS_ADMIN.password,
      // Every test client registers from 127.0.0.1; a test of the limit sets its own.
      REGISTER_MAX_PER_IP: '1000000',
      ...opts.env,
    },
    { port: opts.port },
  );
}

export const IDP_KEYS = {
  publishable: 'sb_publishable_resilience_4hTq8WmZ2cVbN7xKp',
  secret: 'sb_secret_resilience_9LrD3fGs6JwQ1yHe',
};

/** One signing key per test process: a restarted idp keeps accepting the tokens it issued before. */
const IDP_SIGNING_KEY = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

export async function startIdpProcess(databaseUrl: string, opts: ProcessOptions = {}): Promise<ServiceProcess & { dataDir: string }> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'svc-resilience-idp-'));
  try {
    const proc = await startServiceProcess(
      'src/idp/server.ts',
      {
        ...BLANK,
        DATABASE_URL: databaseUrl,
        DATA_DIR: dataDir,
        IDP_PUBLISHABLE_KEY: IDP_KEYS.publishable,
        IDP_SECRET_KEY: IDP_KEYS.secret,
        IDP_SIGNING_KEY,
        IDP_AUTOCONFIRM: 'true',
        ...RELAXED_RATE_LIMITS,
        ...opts.env,
      },
      { port: opts.port },
    );
    // However the process ends (stop, kill, crash), its directory goes with it.
    proc.child.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
    return { ...proc, dataDir };
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
}

export function startNotesProcess(idpUrl: string, opts: ProcessOptions & { verify?: 'remote' | 'local' } = {}): Promise<ServiceProcess> {
  return startServiceProcess(
    'src/notes/server.ts',
    {
      ...BLANK,
      IDP_URL: idpUrl,
      IDP_PUBLISHABLE_KEY: IDP_KEYS.publishable,
      IDP_SECRET_KEY: IDP_KEYS.secret,
      IDP_VERIFY: opts.verify ?? 'remote',
      ...opts.env,
    },
    { port: opts.port },
  );
}

/** Stops a process if it still runs (SIGKILL: cleanup after a failed test must not wait). */
export async function ensureStopped(proc: ServiceProcess | undefined): Promise<void> {
  if (proc && proc.child.exitCode === null && proc.child.signalCode === null) await proc.kill();
}
