// One way to define a service, and one way to run it: as a process (runService, from server.ts) or
// inside a test (startService). A definition declares its configuration, its migrations and a build
// step; the kit opens what the build step receives (pool, Redis, clock, log, counters, the mail
// outbox, periodic jobs) and closes each of them when the service stops, in the right order: the
// server stops taking requests and finishes those in flight, then periodic jobs finish their run,
// then due mail is sent, then Redis and the pool close.
import { fileURLToPath } from 'node:url';
import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { pino, type Logger } from 'pino';
import { type Clock, systemClock } from './clock.js';
import { type ConfigOf, type ConfigShape, type LogLevel, loadConfig, loadConfigOrExit } from './config.js';
import { type Migration, type Pool, createPool, migrate, readMigrations, withDatabase } from './db.js';
import { type App, type HttpAppOptions, buildHttpApp } from './http/app.js';
import { httpSettings } from './http/limits.js';
import { logDestination } from './http/logging.js';
import { type OutgoingMail, enqueueMail } from './mail/outbox.js';
import { createMailTransport } from './mail/transport.js';
import { type MailWorker, type MailWorkerOptions, startMailWorker } from './mail/worker.js';
import { type CounterStore, FixedWindowLimiter, MemoryCounterStore, RedisCounterStore } from './rate-limit.js';
import { awaitRedisAtStart, connectRedis } from './redis.js';

/** The variables every service with an HTTP server has (commonVars / httpVars in config.ts). */
export interface ServiceConfig {
  PORT: number;
  HOST: string;
  LOG_LEVEL: LogLevel;
  TRUST_PROXY: string | undefined;
  METRICS_TOKEN: string | undefined;
  HTTP_HEADERS_TIMEOUT_MS: number;
  HTTP_REQUEST_TIMEOUT_MS: number;
  HTTP_KEEP_ALIVE_TIMEOUT_MS: number;
  HTTP_MAX_CONNECTIONS: number;
  HTTP_MAX_CONNECTIONS_PER_CLIENT: number;
  HTTP_PUBLIC_BODY_TIMEOUT_MS: number;
  HSTS_MAX_AGE: number;
  OPENAPI_RESPONSE_CHECK: boolean;
  DATABASE_URL?: string | undefined;
  DATABASE_NAMED_STATEMENTS?: boolean;
  DATA_DIR?: string;
  REDIS_URL?: string | undefined;
  SMTP_URL?: string | undefined;
  MAIL_FROM?: string;
}

/** A folder of plain SQL migrations, recorded under its own scope (db.ts migrate). */
export interface MigrationSet {
  scope: string;
  dir: string;
}

/** The outbox every service that sends mail shares (./mail): applied under the kit's own scope. */
const MAIL_MIGRATIONS: MigrationSet = { scope: 'mail', dir: fileURLToPath(new URL('./mail/migrations', import.meta.url)) };

export interface ServiceDefinition<S extends ConfigShape, Deps = object> {
  name: string;
  /** The service's variables, declared once (config.ts). */
  config: S;
  /** false: the service keeps no database of its own (notes). */
  database?: boolean;
  /** Its migration sets, applied in order at every start (already applied ones are skipped). */
  migrations?: (config: ConfigOf<S>) => MigrationSet[];
  /** Connections of its pool. */
  poolMax?: number;
  /** It sends mail: the kit applies the outbox table, and with SMTP_URL set gives `mail` and runs the worker. */
  mail?: boolean;
  /**
   * What must be done as superuser on its database before it connects as its own role (the embedded
   * database of `npm start` and of a service started alone); a DATABASE_URL deployment does it by hand.
   */
  prepareDatabase?: (superuserDatabaseUrl: string, config: ConfigOf<S>) => Promise<void>;
  /** Builds the app: its limiters, mail kinds, periodic jobs and routes, from what the kit opened. */
  build(ctx: ServiceContext<ConfigOf<S>, Deps>): Promise<App>;
}

/** Gives a definition its types; the definition itself is returned unchanged. */
export function defineService<S extends ConfigShape, Deps = object>(
  definition: ServiceDefinition<S, Deps> & (ConfigOf<S> extends ServiceConfig ? unknown : never),
): ServiceDefinition<S, Deps> {
  return definition;
}

/** The outbox of a service that sends mail (SMTP_URL set). */
export interface MailOutbox {
  /** Queues a mail in the caller's transaction: it is sent only if that transaction commits. */
  enqueue(db: Parameters<typeof enqueueMail>[0], mail: OutgoingMail): Promise<void>;
  /** After the commit: send now rather than at the worker's next poll. */
  wake(): void;
}

export type ServiceLog = Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;

/** What the kit hands a service's build step. Everything in it is closed by the kit on stop. */
export interface ServiceContext<C, Deps = object> {
  config: C;
  /** The service's pool (services with `database: false` have none: using it throws). */
  pool: Pool;
  /** The URL of its database; undefined when the caller handed over a pool. */
  databaseUrl: string | undefined;
  /** Shared counters between instances (REDIS_URL); undefined: counters live in this process. */
  redis: Redis | undefined;
  clock: Clock;
  /** The service's log: its HTTP app's logger once httpApp() has built it. */
  readonly log: ServiceLog;
  /** Test hooks a service accepts (a code generator, a password hasher…); empty in a process. */
  deps: Partial<Deps>;
  /** The service's HTTP app, with the settings every service shares taken from its configuration. */
  httpApp(options: ServiceHttpOptions): Promise<App>;
  /** Counters under `prefix`: in Redis (falling back to this process while Redis is away) or in this process. */
  counters(prefix: string): CounterStore;
  /** A fixed-window limiter of `max` per `windowMs` on counters under `prefix`. */
  limiter(prefix: string, max: number, windowMs: number): FixedWindowLimiter;
  /** The mail outbox; undefined when SMTP_URL is not set. */
  mail: MailOutbox | undefined;
  /** Runs `job` every `intervalMs` once the service is up; a run in progress finishes before the pool closes. */
  every(name: string, intervalMs: number, job: () => Promise<unknown>, options?: JobOptions): void;
  /** Something the build opened that must close after the server stopped and before the pool does. */
  onClose(close: () => Promise<void> | void): void;
}

/** What a service says about its HTTP app; the rest comes from its configuration. */
export type ServiceHttpOptions = Omit<
  HttpAppOptions,
  'logLevel' | 'logStream' | 'trustProxy' | 'http' | 'responseCheck' | 'readiness' | 'metrics'
> & {
  /** Throws when the service cannot serve; default: its pool answers `SELECT 1`. */
  readiness?: () => Promise<void>;
  metrics?: Omit<NonNullable<HttpAppOptions['metrics']>, 'token'>;
};

export interface StartOptions<Deps = object> {
  /** The environment the configuration is read from (a process: process.env). */
  env: Record<string, string | undefined>;
  /** The database to use; else DATABASE_URL. */
  databaseUrl?: string;
  /** A pool on a database its owner already migrated, used instead of opening one (left open on close). */
  pool?: Pool;
  /** A Redis connection to use instead of REDIS_URL's (left open on close). */
  redis?: Redis;
  clock?: Clock;
  /** Where the log goes (tests capture it); stdout otherwise. */
  logStream?: Writable;
  /** Listen on this port and host once built; omitted: built only (tests use inject). */
  listen?: { port: number; host: string };
  deps?: Partial<Deps>;
  /** The mail worker's timing (tests shorten its retries). */
  mailWorker?: Partial<Pick<MailWorkerOptions, 'pollIntervalMs' | 'retryBaseMs' | 'retryMaxMs' | 'maxAttempts'>>;
}

export interface RunningService<C> {
  app: App;
  config: C;
  /** Where it listens; '' when built only. */
  url: string;
  /** Its pool (undefined for a service without a database). */
  pool: Pool | undefined;
  /** Stops taking requests, finishes those in flight, then closes everything the kit opened. */
  close(): Promise<void>;
}

/** The migration sets a service applies at start, the kit's own outbox first. */
export function migrationSets<S extends ConfigShape>(definition: ServiceDefinition<S, never>, config: ConfigOf<S>): MigrationSet[] {
  return [...(definition.mail ? [MAIL_MIGRATIONS] : []), ...(definition.migrations?.(config) ?? [])];
}

export async function readMigrationSets(sets: MigrationSet[]): Promise<Array<{ scope: string; migrations: Migration[] }>> {
  return Promise.all(sets.map(async ({ scope, dir }) => ({ scope, migrations: await readMigrations(dir) })));
}

/**
 * Builds a service from its definition and the options: opens its pool and Redis, applies its
 * migrations, runs its build step, starts its periodic jobs and mail worker, and listens when asked.
 * Whatever fails on the way closes what was opened before it.
 */
export async function startService<S extends ConfigShape, Deps>(
  definition: ServiceDefinition<S, Deps>,
  options: StartOptions<Deps>,
): Promise<RunningService<ConfigOf<S>>> {
  const config = loadConfig(definition.config, options.env) as ConfigOf<S> & ServiceConfig;
  const clock = options.clock ?? systemClock;
  let log: ServiceLog = pino({ level: config.LOG_LEVEL, base: { service: definition.name } }, options.logStream ?? logDestination());
  // What is open so far, closed in this order: the server (requests in flight finish), what the
  // build opened, periodic jobs (a run in progress finishes), the mail worker (due mail is sent),
  // counters, then Redis and the pool.
  let app: App | undefined;
  const buildClosers: Array<() => Promise<void> | void> = [];
  const jobStoppers: Array<() => Promise<void>> = [];
  let worker: MailWorker | undefined;
  const memoryStores: MemoryCounterStore[] = [];
  let ownRedis: Redis | undefined;
  let ownPool: Pool | undefined;
  const close = async () => {
    await app?.close();
    for (const closeOne of buildClosers.splice(0).reverse()) await closeOne();
    for (const stopJob of jobStoppers.splice(0)) await stopJob();
    await worker?.stop();
    for (const store of memoryStores.splice(0)) store.close();
    ownRedis?.disconnect();
    await ownPool?.end();
  };

  try {
    const databaseUrl = options.databaseUrl ?? config.DATABASE_URL;
    if (definition.database !== false && !options.pool) {
      if (!databaseUrl) throw new Error(`${definition.name} needs a database: set DATABASE_URL`);
      ownPool = createPool(databaseUrl, {
        max: definition.poolMax ?? 20,
        applicationName: definition.name,
        namedStatements: config.DATABASE_NAMED_STATEMENTS ?? true,
      });
    }
    const pool = options.pool ?? ownPool;
    if (ownPool) {
      for (const { scope, migrations } of await readMigrationSets(migrationSets(definition as ServiceDefinition<S, never>, config))) {
        await migrate(ownPool, scope, migrations);
      }
    }

    if (!options.redis && config.REDIS_URL) ownRedis = connectRedis(config.REDIS_URL, (err) => log.warn(`redis: ${err.message}`));
    const redis = options.redis ?? ownRedis;
    const counters = (prefix: string): CounterStore => {
      const memory = new MemoryCounterStore(clock);
      memoryStores.push(memory);
      return redis ? new RedisCounterStore(redis, `${definition.name}:${prefix}:`, memory, clock, (m) => log.warn(m)) : memory;
    };
    const mail: MailOutbox | undefined =
      definition.mail && config.SMTP_URL ? { enqueue: (db, m) => enqueueMail(db, m), wake: () => worker?.wake() } : undefined;
    const jobs: Array<{ name: string; intervalMs: number; job: () => Promise<unknown>; options?: JobOptions }> = [];

    const ctx: ServiceContext<ConfigOf<S>, Deps> = {
      config,
      get pool(): Pool {
        if (!pool) throw new Error(`${definition.name} keeps no database`);
        return pool;
      },
      databaseUrl: options.pool ? undefined : databaseUrl,
      redis,
      clock,
      get log() {
        return log;
      },
      deps: options.deps ?? {},
      async httpApp(http) {
        const { readiness, metrics, ...rest } = http;
        app = await buildHttpApp({
          ...rest,
          logLevel: config.LOG_LEVEL,
          logStream: options.logStream,
          trustProxy: config.TRUST_PROXY,
          http: httpSettings(config),
          responseCheck: config.OPENAPI_RESPONSE_CHECK,
          readiness:
            readiness ??
            (async () => {
              await ctx.pool.query('SELECT 1');
            }),
          metrics: { token: config.METRICS_TOKEN, ...(pool && !metrics?.registry ? { pools: { main: pool } } : {}), ...metrics },
        });
        log = app.log;
        return app;
      },
      counters,
      limiter: (prefix, max, windowMs) => new FixedWindowLimiter(max, windowMs, counters(prefix), clock),
      mail,
      every: (name, intervalMs, job, jobOptions) => {
        jobs.push({ name, intervalMs, job, options: jobOptions });
      },
      onClose: (closeOne) => {
        buildClosers.push(closeOne);
      },
    };

    const built = await definition.build(ctx);
    if (!app || built !== app) throw new Error(`${definition.name}: build must return the app made by ctx.httpApp()`);

    if (redis) await awaitRedisAtStart(redis, log);
    if (mail && pool) {
      worker = startMailWorker({
        pool,
        transport: createMailTransport(config.SMTP_URL!),
        from: config.MAIL_FROM ?? `${definition.name} <no-reply@localhost>`,
        log: app.log,
        ...options.mailWorker,
      });
    }
    for (const { name, intervalMs, job, options: jobOptions } of jobs) {
      jobStoppers.push(startPeriodicJob(name, intervalMs, job, app.log, jobOptions));
    }
    const url = options.listen ? await app.listen(options.listen) : '';
    return { app, config, url, pool, close };
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
}

export interface JobOptions {
  /** When the first run comes, if sooner than intervalMs (an instance restarted more often than its interval still runs it). */
  firstRunAfterMs?: number;
}

/**
 * A job run every `intervalMs` (the first run after `firstRunAfterMs` when that is sooner). A run
 * never overlaps the previous one; a failed run is logged at warn (`job_failed`) and the next one
 * comes at its time. Stopping waits for a run in progress.
 */
export function startPeriodicJob(
  name: string,
  intervalMs: number,
  job: () => Promise<unknown>,
  log: Pick<ServiceLog, 'warn'>,
  options: JobOptions = {},
): () => Promise<void> {
  let running: Promise<void> | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const run = () => {
    if (stopped) return;
    if (!running) {
      running = job()
        .then(() => undefined)
        .catch((err: Error) => log.warn({ event: 'job_failed', job: name, err: { message: err.message } }, `${name} failed`))
        .finally(() => {
          running = undefined;
        });
    }
    schedule(intervalMs);
  };
  const schedule = (delayMs: number) => {
    if (stopped) return;
    timer = setTimeout(run, delayMs);
    timer.unref();
  };
  schedule(Math.min(intervalMs, options.firstRunAfterMs ?? intervalMs));
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}

/**
 * The process entry of every service (its server.ts): reads its configuration from the environment
 * (a bad variable stops the process with one line naming it), opens its database (DATABASE_URL, or a
 * database of its own on an embedded PostgreSQL under DATA_DIR, reached as its own login role), starts
 * it, listens, and on SIGTERM/SIGINT stops accepting, lets in-flight requests finish, then closes
 * everything. A second signal exits at once.
 */
export async function runService<S extends ConfigShape, Deps>(definition: ServiceDefinition<S, Deps>): Promise<void> {
  const config = loadConfigOrExit(definition.config) as ConfigOf<S> & ServiceConfig;
  // The process's one log destination: these lines stay in order with the app's (logDestination).
  const log = pino({ level: config.LOG_LEVEL, base: { service: definition.name } }, logDestination());
  let service: RunningService<ConfigOf<S>> | undefined;
  let stopEmbedded: (() => Promise<void>) | undefined;
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
      await service?.close();
      await stopEmbedded?.();
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
    let databaseUrl = config.DATABASE_URL;
    if (definition.database !== false && !databaseUrl) {
      const embedded = await openEmbeddedDatabase(definition, config, log);
      databaseUrl = embedded.databaseUrl;
      stopEmbedded = embedded.stop;
    }
    service = await startService(definition, { env: process.env, databaseUrl, listen: { port: config.PORT, host: config.HOST } });
    log.info(`${definition.name} listening on ${service.url.replace('0.0.0.0', 'localhost')} (docs at /docs)`);
  } catch (err) {
    log.error({ err: { message: (err as Error).message } }, `${definition.name} failed to start: ${startFailure(err, config)}`);
    await service?.close().catch(() => {});
    await stopEmbedded?.().catch(() => {});
    process.exit(1);
  }
}

/**
 * A database named after the service on the embedded PostgreSQL under DATA_DIR (development: the
 * module is loaded only here, so a deployment with DATABASE_URL never loads it).
 */
async function openEmbeddedDatabase<S extends ConfigShape, Deps>(
  definition: ServiceDefinition<S, Deps>,
  config: ConfigOf<S> & ServiceConfig,
  log: Logger,
): Promise<{ databaseUrl: string; stop: () => Promise<void> }> {
  const { startEmbeddedPostgres } = await import('../dev/embedded-postgres.js');
  const embedded = await startEmbeddedPostgres(config.DATA_DIR ?? './data', {
    info: (m) => log.info(m),
    warn: (m) => log.warn(m),
    debug: (m) => log.debug(m),
  });
  try {
    const databaseUrl = await embedded.serviceDatabase(definition.name);
    await definition.prepareDatabase?.(withDatabase(embedded.adminUrl, definition.name), config);
    return { databaseUrl, stop: () => embedded.stop() };
  } catch (err) {
    await embedded.stop();
    throw err;
  }
}

/** One line that says what stopped the start, and for a port problem which variable moves it. */
function startFailure(err: unknown, config: Pick<ServiceConfig, 'PORT' | 'HOST'>): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return `port ${config.PORT} on ${config.HOST} is already in use (set PORT to another port)`;
  if (code === 'EACCES') return `not allowed to listen on port ${config.PORT} (ports below 1024 need privileges; set PORT)`;
  if (code === 'EADDRNOTAVAIL') return `${config.HOST} is not an address of this machine (set HOST)`;
  return (err as Error).message;
}
