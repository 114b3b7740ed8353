import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** What the process holding the database tells the launcher. */
export type ShieldedPostgresMessage =
  | { type: 'log'; level: 'info' | 'warn' | 'debug'; msg: string }
  | { type: 'ready'; adminUrl: string; urls: Record<string, string> }
  | { type: 'failed'; message: string };

export interface ShieldedPostgres {
  /** Superuser connection string: for the launcher alone. */
  adminUrl: string;
  /** Each service's connection string, as its own login role (see EmbeddedPostgres.serviceDatabase). */
  urls: Record<string, string>;
  /** Stops PostgreSQL (after the services it serves) and waits for it. */
  stop(): Promise<void>;
}

/** How long a stop may take before the holding process is killed (PostgreSQL's fast shutdown takes about a second). */
const STOP_BOUND_MS = 30_000;

/**
 * `npm start`'s embedded PostgreSQL, in a process of its own group
 * (shielded-postgres-process.ts): Ctrl-C in the terminal does not reach it, so
 * the launcher stops it last, once the services have sent what they queued.
 * Resolves when every named service's database is ready; rejects with the
 * start's one-line reason.
 */
export function startShieldedPostgres(
  dataDir: string,
  services: string[],
  log: { info(msg: string): void; warn(msg: string): void; debug(msg: string): void },
): Promise<ShieldedPostgres> {
  const entry = fileURLToPath(new URL(`./shielded-postgres-process${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url));
  const nodeArgs = entry.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, entry, dataDir, ...services], {
    detached: true,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.send({ type: 'stop' });
    const bound = setTimeout(() => child.kill('SIGKILL'), STOP_BOUND_MS);
    await exited;
    clearTimeout(bound);
  };
  return new Promise((resolve, reject) => {
    child.on('message', (message: ShieldedPostgresMessage) => {
      if (message.type === 'log') log[message.level](message.msg);
      else if (message.type === 'ready') resolve({ adminUrl: message.adminUrl, urls: message.urls, stop });
      else reject(new Error(message.message));
    });
    child.once('exit', (code) => reject(new Error(`the embedded PostgreSQL process exited (code ${code}) before it was ready`)));
    child.once('error', reject);
  });
}
