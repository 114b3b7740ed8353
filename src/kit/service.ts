import { pino, type Logger } from 'pino';
import type { LogLevel } from './config.js';
import { withDatabase } from './db.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded-postgres.js';
import type { App } from './http.js';

export interface ServiceProcessConfig {
  PORT: number;
  HOST: string;
  DATABASE_URL: string | undefined;
  DATA_DIR: string;
  LOG_LEVEL: LogLevel;
}

export interface RunningService {
  app: App;
  /** Releases what the service opened (pools, Redis), after the server stopped taking requests. */
  close?: () => Promise<void>;
}

export function processLogger(name: string, level: LogLevel): Logger {
  return pino({ level, base: { service: name } });
}

/** What a service needs done as superuser on its database before it connects as its own role. */
export type PrepareDatabase = (superuserDatabaseUrl: string) => Promise<void>;

/**
 * Resolves the service's own database: DATABASE_URL when set, otherwise a
 * database named after the service on an embedded PostgreSQL under DATA_DIR,
 * which the service reaches as its own login role, never as superuser.
 */
export async function openDatabase(
  name: string,
  config: ServiceProcessConfig,
  log: Logger,
  prepare?: PrepareDatabase,
): Promise<{ databaseUrl: string; embedded?: EmbeddedPostgres }> {
  if (config.DATABASE_URL) return { databaseUrl: config.DATABASE_URL };
  const embedded = await startEmbeddedPostgres(config.DATA_DIR, {
    info: (m) => log.info(m),
    warn: (m) => log.warn(m),
    debug: (m) => log.debug(m),
  });
  try {
    const databaseUrl = await embedded.serviceDatabase(name);
    await prepare?.(withDatabase(embedded.adminUrl, name));
    return { databaseUrl, embedded };
  } catch (err) {
    await embedded.stop();
    throw err;
  }
}

/**
 * The process entry of every service: open what it needs, build the app,
 * listen, and on SIGTERM/SIGINT stop accepting, let in-flight requests finish,
 * then close pools and the embedded database. A second signal exits at once.
 */
export async function runService(
  name: string,
  config: ServiceProcessConfig,
  build: (ctx: { databaseUrl: string; log: Logger }) => Promise<RunningService>,
  prepareDatabase?: PrepareDatabase,
): Promise<void> {
  let embedded: EmbeddedPostgres | undefined;
  await serve(name, config, async (log) => {
    const db = await openDatabase(name, config, log, prepareDatabase);
    embedded = db.embedded;
    const service = await build({ databaseUrl: db.databaseUrl, log });
    return {
      app: service.app,
      close: async () => {
        await service.close?.();
        await embedded?.stop();
      },
    };
  }, async () => {
    await embedded?.stop();
  });
}

/** The same process entry for a service that keeps no database of its own. */
export async function runServiceWithoutDatabase(
  name: string,
  config: Omit<ServiceProcessConfig, 'DATABASE_URL' | 'DATA_DIR'>,
  build: (ctx: { log: Logger }) => Promise<RunningService>,
): Promise<void> {
  await serve(name, config, (log) => build({ log }), async () => {});
}

async function serve(
  name: string,
  config: Pick<ServiceProcessConfig, 'PORT' | 'HOST' | 'LOG_LEVEL'>,
  open: (log: Logger) => Promise<RunningService>,
  abandon: () => Promise<void>,
): Promise<void> {
  const log = processLogger(name, config.LOG_LEVEL);
  let service: RunningService | undefined;
  let stopping = false;

  const stop = async (signal: string) => {
    if (stopping) {
      log.warn(`${signal} again: exiting without waiting`);
      process.exit(1);
    }
    stopping = true;
    log.info(`${signal}: draining in-flight requests`);
    const force = setTimeout(() => {
      log.error('shutdown took longer than 20 s: exiting');
      process.exit(1);
    }, 20_000);
    force.unref();
    try {
      await service?.app.close();
      await service?.close?.();
      log.info('stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'error while stopping');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  try {
    service = await open(log);
    const address = await service.app.listen({ port: config.PORT, host: config.HOST });
    log.info(`${name} listening on ${address.replace('0.0.0.0', 'localhost')} (docs at /docs)`);
  } catch (err) {
    log.error({ err: { message: (err as Error).message } }, `${name} failed to start: ${startFailure(err, config)}`);
    await service?.close?.().catch(() => {});
    await abandon().catch(() => {});
    process.exit(1);
  }
}

/** One line that says what stopped the start, and for a port problem which variable moves it. */
function startFailure(err: unknown, config: Pick<ServiceProcessConfig, 'PORT' | 'HOST'>): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return `port ${config.PORT} on ${config.HOST} is already in use (set PORT to another port)`;
  if (code === 'EACCES') return `not allowed to listen on port ${config.PORT} (ports below 1024 need privileges; set PORT)`;
  if (code === 'EADDRNOTAVAIL') return `${config.HOST} is not an address of this machine (set HOST)`;
  return (err as Error).message;
}
