import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ensureDatabase, withDatabase } from '../../../src/kit/db.js';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../../../src/dev/embedded-postgres.js';
import { freePort } from '../../helpers/ports.js';

// A PostgreSQL of the test's own, which it may stop and start again: the
// machine's server is shared by every other test and is never touched.

export interface RestartablePostgres {
  /** Superuser URL of the `postgres` database; stays valid across restarts (same port). */
  adminUrl: string;
  port: number;
  running(): boolean;
  /** Fast shutdown: open connections are terminated, as in a real database restart. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** A database of the cluster, created when absent. */
  database(name: string): Promise<string>;
  /**
   * SIGSTOP to the server and every backend: it keeps its sockets but answers nothing, like a
   * server that hangs or a network that drops packets. `thaw()` resumes them.
   */
  freeze(): void;
  thaw(): void;
  /** Stops the server and removes its directory. */
  destroy(): Promise<void>;
}

/** The postmaster (from its pid file) and its children (from /proc). */
function serverProcesses(dataDir: string): number[] {
  const postmaster = Number(readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
      } catch {
        return false;
      }
    })
    .map(Number);
  return [postmaster, ...children];
}

const quiet = { info: () => {}, debug: () => {}, warn: (m: string) => console.error(m) };

export async function startRestartablePostgres(): Promise<RestartablePostgres> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-resilience-pg-'));
  // As root the package runs PostgreSQL as the `postgres` user, which must reach the directory.
  chmodSync(dir, 0o755);
  const port = await freePort();
  let server: EmbeddedPostgres | undefined = await startEmbeddedPostgres(dir, quiet, { port });
  const adminUrl = server.adminUrl;
  let frozen: number[] = [];
  const thaw = () => {
    for (const pid of frozen) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // exited meanwhile
      }
    }
    frozen = [];
  };
  return {
    adminUrl,
    port,
    running: () => server !== undefined,
    async stop() {
      await server?.stop();
      server = undefined;
    },
    async start() {
      if (server) return;
      server = await startEmbeddedPostgres(dir, quiet, { port });
    },
    async database(name: string) {
      await ensureDatabase(adminUrl, name);
      return withDatabase(adminUrl, name);
    },
    freeze() {
      frozen = serverProcesses(dir);
      for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    },
    thaw,
    async destroy() {
      thaw();
      await server?.stop().catch(() => {});
      server = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One query on a short-lived connection (checks made by the test, never by the service). */
export async function queryOnce<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}
