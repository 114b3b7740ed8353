// `npm start`: every service of the project on one embedded PostgreSQL (or on
// DATABASE_URL), each in its own process with its own database, secrets the
// user did not set generated once under DATA_DIR. Ctrl-C or SIGTERM stops the
// services (they drain), then the mailbox, then the database, which runs in a
// process group of its own so the terminal's Ctrl-C never reaches it first.
// The services' logs are shown readably, health probes left out, and the
// banner comes after the start's own lines.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer as createNetServer } from 'node:net';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { type ConfigOf, commonVars, connectionUrl, int, loadConfigOrExit, oneOf, str } from '../kit/config.js';
import { generateEs256PrivateKeyPem } from '../kit/es256-keys.js';
import { ensureDatabase, withDatabase } from '../kit/db.js';
import { DevLog } from './dev-logs.js';
import { checkEmbeddedPostgresCanRun } from './embedded-postgres.js';
import { MAILBOX_HOST, startDevMailbox } from './mailbox.js';
import { loadOrCreateSecret } from './secrets.js';
import { startShieldedPostgres } from './shielded-postgres.js';

const { PORT: _port, HOST: _host, ...shared } = commonVars(0);
const launcherConfig = {
  ...shared,
  /** npm start is local development: the services listen on the loopback interface unless HOST says otherwise. */
  HOST: str({ default: '127.0.0.1' }),
  /** Only shown in the banner; the accounts service reads it (and ADMIN_PASSWORD) itself. */
  ADMIN_EMAIL: str(),
  ACCOUNTS_PORT: int({ default: 3000, min: 1, max: 65535 }),
  SHORTENER_PORT: int({ default: 3001, min: 1, max: 65535 }),
  NOTES_PORT: int({ default: 9999, min: 1, max: 65535 }),
  IDP_PORT: int({ default: 54321, min: 1, max: 65535 }),
  JWT_SECRET: str({ minBytes: 32 }),
  /** Passed through to accounts; with ES256 its JWT_PRIVATE_KEY is generated here when unset. */
  JWT_ALGORITHM: oneOf(['HS256', 'ES256'] as const, { default: 'HS256' }),
  JWT_PRIVATE_KEY: str(),
  IDP_SECRET_KEY: str(),
  IDP_PUBLISHABLE_KEY: str(),
  SHORTENER_ADMIN_KEY: str({ minBytes: 32 }),
  REDIS_URL: connectionUrl(['redis:', 'rediss:']),
  /** Where accounts and the idp send mail; unset, a local development mailbox (maildev) receives it. */
  SMTP_URL: connectionUrl(['smtp:', 'smtps:']),
  /** The development mailbox, on 127.0.0.1: its SMTP port and its web page. */
  MAILDEV_SMTP_PORT: int({ default: 1025, min: 1, max: 65535 }),
  MAILDEV_WEB_PORT: int({ default: 1080, min: 1, max: 65535 }),
  /** How the services' logs are shown: readable lines (pretty), or the JSON lines they write (json). */
  LOG_FORMAT: oneOf(['pretty', 'json'] as const, { default: 'pretty' }),
};
type LauncherConfig = ConfigOf<typeof launcherConfig>;

const srcDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
// Run from source through tsx, or from the compiled dist/ with plain node.
const ext = path.extname(fileURLToPath(import.meta.url));
const nodeArgs = ext === '.ts' ? ['--import', 'tsx'] : [];

/** What every step of a start reads: the settings, where data lives, the address the services are reached at, the launcher's log. */
interface Launch {
  config: LauncherConfig;
  dataDir: string;
  /** The interface the services listen on. */
  host: string;
  /** How a URL names that interface (the loopback address for a wildcard, brackets for IPv6). */
  urlHost: string;
  devLog: DevLog;
  log: pino.Logger;
}

function launchFrom(config: LauncherConfig): Launch {
  const devLog = new DevLog(config.LOG_FORMAT);
  const host = config.HOST;
  return {
    config,
    dataDir: path.resolve(config.DATA_DIR),
    host,
    urlHost: host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host,
    devLog,
    log: pino({ level: config.LOG_LEVEL, base: { service: 'launcher' } }, devLog.stream('launcher')),
  };
}

/** Ends the start with a one-line reason, before or instead of anything the services would print. */
function refuse(message: string): never {
  process.stderr.write(`npm start: ${message}\n`);
  process.exit(1);
}

interface ServiceSpec {
  name: string;
  port: number;
  env: Record<string, string>;
  /** Whether the service keeps a database of its own (notes keeps its rows behind the idp). */
  database: boolean;
  /** What it needs done as superuser on that database first, when it runs as its own role. */
  prepareDatabase?: (superuserDatabaseUrl: string) => Promise<void>;
}

async function secrets({ config: cfg, dataDir }: Launch) {
  const jwtSecret = cfg.JWT_SECRET ?? (await loadOrCreateSecret(dataDir, 'JWT_SECRET', () => randomBytes(48).toString('base64url')));
  // Made here, not by accounts itself: the services start at once, and two processes writing
  // secrets.json together would lose one of the keys.
  const jwtPrivateKey =
    cfg.JWT_ALGORITHM === 'ES256'
      ? (cfg.JWT_PRIVATE_KEY ?? (await loadOrCreateSecret(dataDir, 'JWT_PRIVATE_KEY', generateEs256PrivateKeyPem)))
      : undefined;
  const secretKey =
    cfg.IDP_SECRET_KEY ?? (await loadOrCreateSecret(dataDir, 'IDP_SECRET_KEY', () => `sb_secret_${randomBytes(24).toString('base64url')}`));
  const publishableKey =
    cfg.IDP_PUBLISHABLE_KEY ??
    (await loadOrCreateSecret(dataDir, 'IDP_PUBLISHABLE_KEY', () => `sb_publishable_${randomBytes(24).toString('base64url')}`));
  const shortenerAdminKey =
    cfg.SHORTENER_ADMIN_KEY ?? (await loadOrCreateSecret(dataDir, 'SHORTENER_ADMIN_KEY', () => randomBytes(32).toString('base64url')));
  return { jwtSecret, jwtPrivateKey, secretKey, publishableKey, shortenerAdminKey };
}

/** A public address the user did not set: the one the services are reached at, the same in every link, page and mail. */
const publicUrl = (urlHost: string, variable: string, port: number): Record<string, string> =>
  process.env[variable] ? {} : { [variable]: `http://${urlHost}:${port}` };

/**
 * The idp's mails as notes' own: the notes app is what this idp serves here, so its mails name Notes,
 * come from Notes, and link to notes' pages (the redirect notes asks for), which use the token only
 * when the person presses the page's button: a mail scanner that opens the link spends nothing.
 * Notes has no place to type a six-digit code, so the mails offer none. Any of these set in the
 * environment wins.
 */
function idpMailForNotes(notesUrl: string): Record<string, string> {
  const settings: Record<string, string> = {
    IDP_APP_URL: notesUrl,
    IDP_MAILER_SITE_NAME: 'Notes',
    IDP_MAILER_OFFER_CODE: 'false',
    IDP_MAILER_LINK_RECOVERY: '{{ .RedirectTo }}?token_hash={{ .TokenHash }}&type=recovery',
    // Sent only when the idp confirms addresses by mail (IDP_AUTOCONFIRM=false).
    IDP_MAILER_LINK_SIGNUP: '{{ .RedirectTo }}?token_hash={{ .TokenHash }}&type=signup',
    MAIL_FROM: 'Notes <noreply@localhost>',
  };
  return Object.fromEntries(Object.entries(settings).filter(([name]) => process.env[name] === undefined));
}

function servicesToRun({ config: cfg, urlHost }: Launch, keys: Awaited<ReturnType<typeof secrets>>, smtpUrl: string): ServiceSpec[] {
  const idpUrl = `http://${urlHost}:${cfg.IDP_PORT}`;
  const notesUrl = process.env.NOTES_PUBLIC_URL || `http://${urlHost}:${cfg.NOTES_PORT}`;
  // New at every start: only notes, which gets it too, may name its caller's address to the idp.
  const forwardedSecret = randomBytes(24).toString('base64url');
  // The two services that send mail; MAIL_FROM, when set, reaches them from the environment.
  const mail: Record<string, string> = smtpUrl ? { SMTP_URL: smtpUrl } : {};
  const all: ServiceSpec[] = [
    {
      name: 'idp',
      port: cfg.IDP_PORT,
      // notes connects from 127.0.0.1 and names its caller in X-Forwarded-For, which the idp's
      // per-address rate limits must believe (besides any proxy the user trusts).
      env: {
        IDP_SECRET_KEY: keys.secretKey,
        IDP_PUBLISHABLE_KEY: keys.publishableKey,
        TRUST_PROXY: [cfg.TRUST_PROXY, '127.0.0.1'].filter(Boolean).join(','),
        // Development, as the Supabase CLI: a sign-up is confirmed at once and gets a session (the
        // notes contract's sign-up expects one). The idp's own default is off.
        IDP_AUTOCONFIRM: process.env.IDP_AUTOCONFIRM || 'true',
        IDP_FORWARDED_SECRET: forwardedSecret,
        // Notes' pages (its password reset page) are another origin than the idp's: a mail's link
        // may lead there.
        IDP_REDIRECT_URLS: [process.env.IDP_REDIRECT_URLS, `${notesUrl.replace(/\/+$/, '')}/**`].filter(Boolean).join(','),
        ...mail,
        ...idpMailForNotes(notesUrl),
      },
      database: true,
      // Loaded only when the idp runs, like its server file.
      prepareDatabase: async (url) => (await import('../idp/bootstrap.js')).prepareIdpRoles(url, keys.secretKey),
    },
    {
      name: 'accounts',
      port: cfg.ACCOUNTS_PORT,
      env: {
        JWT_SECRET: keys.jwtSecret,
        ...(keys.jwtPrivateKey ? { JWT_PRIVATE_KEY: keys.jwtPrivateKey } : {}),
        ...mail,
        ...publicUrl(urlHost, 'ACCOUNTS_PUBLIC_URL', cfg.ACCOUNTS_PORT),
      },
      database: true,
    },
    {
      name: 'shortener',
      port: cfg.SHORTENER_PORT,
      env: {
        SHORTENER_ADMIN_KEY: keys.shortenerAdminKey,
        ...(cfg.REDIS_URL ? { REDIS_URL: cfg.REDIS_URL } : {}),
        ...publicUrl(urlHost, 'BASE_URL', cfg.SHORTENER_PORT),
      },
      database: true,
    },
    {
      name: 'notes',
      port: cfg.NOTES_PORT,
      env: {
        IDP_URL: idpUrl,
        IDP_SECRET_KEY: keys.secretKey,
        IDP_PUBLISHABLE_KEY: keys.publishableKey,
        IDP_FORWARDED_SECRET: forwardedSecret,
        ...publicUrl(urlHost, 'NOTES_PUBLIC_URL', cfg.NOTES_PORT),
      },
      database: false,
    },
  ];
  return all.filter((s) => existsSync(path.join(srcDir, s.name, `server${ext}`)));
}

async function waitHealthy(urlHost: string, port: number, child: ChildProcess): Promise<boolean> {
  for (let i = 0; i < 600 && child.exitCode === null; i++) {
    try {
      // Each try is bounded: a port that accepts and never answers must not hold the start for ever.
      if ((await fetch(`http://${urlHost}:${port}/healthz`, { signal: AbortSignal.timeout(2000) })).ok) return true;
    } catch {
      // not listening yet, or no answer within the try
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/** Whether something already listens on the port (checked before anything starts, so the answer names the variable that moves it). */
function portInUse(port: number, on: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createNetServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'EADDRINUSE'));
    probe.listen({ port, host: on, exclusive: true }, () => probe.close(() => resolve(false)));
  });
}

/** Where services send mail when SMTP_URL is unset: the development mailbox. */
const devMailboxSmtpUrl = (cfg: LauncherConfig) => `smtp://${MAILBOX_HOST}:${cfg.MAILDEV_SMTP_PORT}`;

const SERVICE_PORTS = ['IDP_PORT', 'ACCOUNTS_PORT', 'SHORTENER_PORT', 'NOTES_PORT'] as const;
const MAILBOX_PORTS = ['MAILDEV_SMTP_PORT', 'MAILDEV_WEB_PORT'] as const;

/** Each port the start needs is its own and free; checked before anything is written under DATA_DIR. */
async function checkPorts({ config, host }: Launch): Promise<void> {
  const variables: ReadonlyArray<(typeof SERVICE_PORTS)[number] | (typeof MAILBOX_PORTS)[number]> = config.SMTP_URL
    ? SERVICE_PORTS
    : [...SERVICE_PORTS, ...MAILBOX_PORTS];
  for (const [i, variable] of variables.entries()) {
    const twin = variables.slice(0, i).find((other) => config[other] === config[variable]);
    if (twin) refuse(`${twin} and ${variable} are both ${config[variable]}; each service needs a port of its own`);
  }
  for (const variable of variables) {
    const onHost = (MAILBOX_PORTS as readonly string[]).includes(variable) ? MAILBOX_HOST : host;
    if (await portInUse(config[variable], onHost))
      refuse(`port ${config[variable]} is already in use on ${onHost}; set ${variable} to another port`);
  }
}

/** Each service's DATABASE_URL, and how to stop the database the start began (nothing on DATABASE_URL). */
interface Databases {
  urls: Map<string, string>;
  stop: () => Promise<void>;
}

/** On DATABASE_URL: a database per service, created when missing. */
async function prepareGivenDatabases(databaseUrl: string, services: ServiceSpec[]): Promise<Databases> {
  const urls = new Map<string, string>();
  for (const s of services.filter((s) => s.database)) {
    await ensureDatabase(databaseUrl, s.name).catch((err: Error) =>
      refuse(`could not prepare the database ${s.name} on DATABASE_URL: ${err.message}`),
    );
    urls.set(s.name, withDatabase(databaseUrl, s.name));
  }
  return { urls, stop: async () => {} };
}

/** The embedded database: each service connects as a login role of its own; the superuser stays here. */
async function startEmbeddedDatabase({ dataDir, log }: Launch, services: ServiceSpec[]): Promise<Databases> {
  const withDatabases = services.filter((s) => s.database);
  const embedded = await startShieldedPostgres(
    dataDir,
    withDatabases.map((s) => s.name),
    { info: (m) => log.info(m), warn: (m) => log.warn(m), debug: (m) => log.debug(m) },
  ).catch((err: Error) => refuse(err.message));
  const urls = new Map<string, string>();
  try {
    for (const s of withDatabases) {
      urls.set(s.name, embedded.urls[s.name]!);
      await s.prepareDatabase?.(withDatabase(embedded.adminUrl, s.name));
    }
  } catch (err) {
    log.error(`could not prepare the services' databases: ${(err as Error).message}`);
    await embedded.stop();
    process.exit(1);
  }
  return { urls, stop: () => embedded.stop() };
}

/** The development mailbox when SMTP_URL is unset; started once the database is ready, so a start that fails before leaves nothing running. */
async function startMailbox({ config, dataDir }: Launch, databases: Databases) {
  if (config.SMTP_URL) return undefined;
  return startDevMailbox({
    smtpPort: config.MAILDEV_SMTP_PORT,
    webPort: config.MAILDEV_WEB_PORT,
    directory: path.join(dataDir, 'maildev'),
  }).catch(async (err: Error) => {
    process.stderr.write(`npm start: the development mailbox (maildev) did not start: ${err.message}\n`);
    await databases.stop();
    process.exit(1);
  });
}

/**
 * Starts each service in a process group of its own (a terminal's Ctrl-C reaches only the launcher,
 * which then stops each service once, in order, with the same signal), and stops everything when
 * one exits unexpectedly or the launcher is told to stop.
 */
function startServices(
  { host, dataDir, devLog, log }: Launch,
  services: ServiceSpec[],
  databases: Databases,
  mailbox: { stop(): Promise<void> } | undefined,
) {
  const children = new Map<string, ChildProcess>();
  let stopping = false;

  /** Stops every service with the signal the launcher got (Ctrl-C: SIGINT), so their logs name it, then the database. */
  async function stopAll(code: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<never> {
    stopping = true;
    const exits = [...children.values()]
      .filter((c) => c.exitCode === null && c.signalCode === null)
      .map((c) => new Promise((resolve) => c.once('exit', resolve)));
    for (const child of children.values()) child.kill(signal);
    await Promise.all(exits);
    // After the services: they send what they queued before they stop.
    await mailbox?.stop().catch(() => {});
    await databases.stop();
    log.info('database stopped: every service had stopped before it');
    process.exit(code);
  }

  // A service without a database gets none; the launcher's own DATABASE_URL never reaches a service as is.
  const { DATABASE_URL: _launcherDatabaseUrl, ...inheritedEnv } = process.env;
  for (const s of services) {
    const url = databases.urls.get(s.name);
    const child = spawn(process.execPath, [...nodeArgs, path.join(srcDir, s.name, `server${ext}`)], {
      env: { ...inheritedEnv, ...s.env, HOST: host, PORT: String(s.port), ...(url ? { DATABASE_URL: url } : {}), DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    devLog.relay(s.name, child.stdout!);
    devLog.relay(s.name, child.stderr!);
    children.set(s.name, child);
    child.on('exit', (code) => {
      if (!stopping) {
        log.error(`${s.name} exited unexpectedly (code ${code}); stopping everything`);
        void stopAll(1);
      }
    });
  }
  process.on('SIGINT', () => void stopAll(0, 'SIGINT'));
  process.on('SIGTERM', () => void stopAll(0));
  return { children, isStopping: () => stopping };
}

/** Where each service is, where mail goes, which keys exist and where they are kept (never their values). */
function printBanner(
  { config, dataDir, host, urlHost }: Launch,
  services: ServiceSpec[],
  keys: Awaited<ReturnType<typeof secrets>>,
  mailbox: { webUrl: string; smtpUrl: string } | undefined,
): void {
  const secretsFile = path.join(dataDir, 'secrets.json');
  const lines = services.map((s) => `  ${s.name.padEnd(10)} http://${urlHost}:${s.port}   API documents: http://${urlHost}:${s.port}/docs`);
  process.stdout.write(
    `\nAll services are up (listening on ${host}; set HOST to change it):\n${lines.join('\n')}\n` +
      `Database: ${config.DATABASE_URL ? 'DATABASE_URL' : `embedded PostgreSQL in ${path.join(dataDir, 'pg')}`}\n` +
      `Mail: ${mailbox ? `development mailbox at ${mailbox.webUrl} (SMTP ${mailbox.smtpUrl}; set SMTP_URL to send real mail)` : 'sent through SMTP_URL'}\n` +
      `idp publishable key (public by design): ${keys.publishableKey}\n` +
      // Secrets are named, never shown in part: a terminal's scrollback and a captured log are not safe places.
      `Secret keys (generated once into ${secretsFile}, mode 0600, unless set in the environment): ` +
      `IDP_SECRET_KEY, JWT_SECRET, ${keys.jwtPrivateKey ? 'JWT_PRIVATE_KEY, ' : ''}SHORTENER_ADMIN_KEY${config.DATABASE_URL ? '' : ', DATABASE_PASSWORD_<SERVICE>'}\n` +
      `  read one with: node -pe "require('${secretsFile}').SHORTENER_ADMIN_KEY"\n` +
      `Admin account: ${config.ADMIN_EMAIL ? `${config.ADMIN_EMAIL} (ADMIN_EMAIL)` : 'none (set ADMIN_EMAIL and ADMIN_PASSWORD)'}\n` +
      `Logs: ${config.LOG_FORMAT === 'pretty' ? 'readable lines (LOG_FORMAT=json for the JSON the services write)' : 'JSON lines'}; health probes are not shown\n` +
      'Press Ctrl-C to stop.\n\n',
  );
}

async function main(): Promise<void> {
  const launch = launchFrom(loadConfigOrExit(launcherConfig));
  const { config, dataDir } = launch;
  await checkPorts(launch);
  if (!config.DATABASE_URL) await checkEmbeddedPostgresCanRun(dataDir).catch((err: Error) => refuse(err.message));
  const keys = await secrets(launch);
  const services = servicesToRun(launch, keys, config.SMTP_URL ?? devMailboxSmtpUrl(config));
  const databases = config.DATABASE_URL
    ? await prepareGivenDatabases(config.DATABASE_URL, services)
    : await startEmbeddedDatabase(launch, services);
  // From here on, what the launcher and the services write is theirs alone (mode 0600, folders 0700):
  // the mailbox keeps every mail, reset links included, as it arrives.
  process.umask(0o077);
  const mailbox = await startMailbox(launch, databases);
  const { children, isStopping } = startServices(launch, services, databases, mailbox);
  const healthy = await Promise.all(services.map((s) => waitHealthy(launch.urlHost, s.port, children.get(s.name)!)));
  // The banner comes last: after the lines each service writes as it starts, which may still be on their way.
  await launch.devLog.quiet(500, 3000);
  if (healthy.every(Boolean) && !isStopping()) printBanner(launch, services, keys, mailbox);
}

await main();
