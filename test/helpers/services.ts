// Every service in a test is started the one way a process starts it: startService with its
// definition (src/kit/service.ts), from environment strings, here with the test run's database,
// its log lines captured, and a free port when the test speaks real HTTP. The per-service helpers
// (shortener.ts, accounts.ts, idp.ts, notes.ts) only add their test defaults.
import type { Redis } from 'ioredis';
import type { Clock } from '../../src/kit/clock.js';
import { type ConfigOf, type ConfigShape, loadConfig } from '../../src/kit/config.js';
import type { Pool } from '../../src/kit/db.js';
import {
  type RunningService,
  type ServiceDefinition,
  type StartOptions,
  migrationSets,
  readMigrationSets,
  startService,
} from '../../src/kit/service.js';
import { type TestDatabase, freshDatabase } from './database.js';
import { LogCapture } from './logs.js';
import { freePort } from './ports.js';
import { responseCheckEnv } from './response-check.js';

export interface TestServiceOptions<Deps = object> {
  /** Variables on top of the service's test defaults, read as the process reads them. */
  env?: Record<string, string>;
  /** A pool on a database of the test's (a file's shared one); left open by close. */
  pool?: Pool;
  /** A database of the test's; left in place by close. Without it or a pool, one of its own, dropped by close. */
  databaseUrl?: string;
  /** Also listen on 127.0.0.1 (a free port, known before the start, so PORT-derived URLs are right). */
  listen?: boolean;
  /** With listen: this port rather than a free one picked here (a test that must name its URL in the env). */
  port?: number;
  clock?: Clock;
  redis?: Redis;
  /** Where its log lines go; a new capture otherwise. */
  logs?: LogCapture;
  /** The service's own test hooks (a code generator, a password hasher, a fetch…). */
  deps?: Partial<Deps>;
  mailWorker?: StartOptions['mailWorker'];
}

export interface TestService<C> extends RunningService<C> {
  /** Every line it logs (at LOG_LEVEL, quiet unless its env says otherwise). */
  logs: LogCapture;
  /** The database it runs on ('' for a service without one). */
  databaseUrl: string;
}

/** A new database of the test run with a service's migrations applied (a clone of a template). */
export async function serviceDatabase<S extends ConfigShape, Deps>(
  definition: ServiceDefinition<S, Deps>,
  env: Record<string, string | undefined> = {},
  prepare?: (url: string) => Promise<void>,
): Promise<TestDatabase> {
  const config = loadConfig(definition.config, env);
  const sets = await readMigrationSets(migrationSets(definition as ServiceDefinition<S, never>, config));
  return freshDatabase(definition.name, sets, prepare);
}

/** Starts a service for a test: `defaults` are its test variables, `options.env` goes on top. */
export async function startTestService<S extends ConfigShape, Deps>(
  definition: ServiceDefinition<S, Deps>,
  defaults: Record<string, string>,
  options: TestServiceOptions<Deps>,
  database: (env: Record<string, string>) => Promise<TestDatabase> = (env) => serviceDatabase(definition, env),
): Promise<TestService<ConfigOf<S>>> {
  const logs = options.logs ?? new LogCapture();
  const port = options.listen ? (options.port ?? (await freePort())) : undefined;
  const env: Record<string, string> = {
    ...(port ? { PORT: String(port), HOST: '127.0.0.1' } : {}),
    ...defaults,
    ...responseCheckEnv(),
    ...options.env,
  };
  const own = definition.database !== false && !options.pool && !options.databaseUrl ? await database(env) : undefined;
  const databaseUrl = options.databaseUrl ?? own?.url ?? '';
  try {
    const running = await startService(definition, {
      env,
      databaseUrl: databaseUrl || undefined,
      pool: options.pool,
      redis: options.redis,
      clock: options.clock,
      logStream: logs,
      deps: options.deps,
      mailWorker: options.mailWorker,
      listen: port ? { port, host: '127.0.0.1' } : undefined,
    });
    return {
      ...running,
      logs,
      databaseUrl,
      close: async () => {
        await running.close();
        await own?.drop();
      },
    };
  } catch (err) {
    await own?.drop().catch(() => {});
    throw err;
  }
}

/** A service that keeps a database: its pool is always there. */
export function withPool<T extends { pool: Pool | undefined }>(service: T): T & { pool: Pool } {
  if (!service.pool) throw new Error('the service started without a database');
  return service as T & { pool: Pool };
}

/** Something a test started and must end: an in-process service (close) or a service process (stop). */
type Started = { close(): Promise<unknown> } | { stop(): Promise<unknown> };

/**
 * Promise.all for starting services side by side. When one start fails (a start that timed out on a
 * loaded machine), the others are waited for and ended before the error is thrown: their handles
 * never reach the test's variables, so nothing else would end them, and the file would hang until
 * its timeout (30 minutes in the resilience suite) instead of failing at once.
 */
export async function startAll<const T extends readonly Promise<Started>[]>(
  starts: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(starts);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(
      settled.map((s) => (s.status === 'fulfilled' ? ('close' in s.value ? s.value.close() : s.value.stop()).catch(() => {}) : undefined)),
    );
    throw failed.reason;
  }
  return settled.map((s) => (s as PromiseFulfilledResult<Started>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}

/** What a before hook started, read by the tests after it (never while the file is being defined). */
export function started<T>(value: T | undefined): T {
  if (value === undefined) throw new Error('not started yet: it is started in a before hook; use it inside tests');
  return value;
}
