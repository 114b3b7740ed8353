import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../../helpers/ports.js';

// PgBouncer (the Debian package's binary) as a child process of the test, in
// transaction pooling mode in front of the run's PostgreSQL: each transaction,
// or each statement outside one, may run on a different server connection.

const DEFAULT_BINARY = '/usr/sbin/pgbouncer';

/** The pgbouncer binary: the Debian path, else the first on PATH; undefined when not installed. */
export function findPgBouncer(): string | undefined {
  if (existsSync(DEFAULT_BINARY)) return DEFAULT_BINARY;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && existsSync(path.join(dir, 'pgbouncer'))) return path.join(dir, 'pgbouncer');
  }
  return undefined;
}

export interface PgBouncer {
  port: number;
  /** "PgBouncer 1.18.0" */
  version: string;
  /** Connection string of `database` through the pooler, as `user` (default: the upstream's). */
  url(database: string, user?: { name: string; password: string }): string;
  output(): string;
  stop(): Promise<void>;
}

export interface PgBouncerOptions {
  /** Server connections per (database, user): fewer than the services' pools, so clients really share them. */
  poolSize: number;
  /** Login roles besides the upstream URL's user, with their passwords (PgBouncer authenticates clients itself). */
  users?: Array<{ name: string; password: string }>;
  /** Server-side statement timeout set on each server connection (clients cannot pass it through the pooler). */
  statementTimeoutMillis: number;
}

const quote = (s: string) => `"${s.replace(/"/g, '""')}"`;

/** A user that may run PgBouncer when the test runs as root (PgBouncer refuses to). */
function unprivilegedUser(): string {
  const passwd = readFileSync('/etc/passwd', 'utf8');
  return /^postgres:/m.test(passwd) ? 'postgres' : 'nobody';
}

export async function startPgBouncer(binary: string, upstreamUrl: string, opts: PgBouncerOptions): Promise<PgBouncer> {
  const upstream = new URL(upstreamUrl);
  const admin = { name: decodeURIComponent(upstream.username), password: decodeURIComponent(upstream.password) || 'pooler-test-password' };
  const users = [admin, ...(opts.users ?? [])];
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-pgbouncer-'));
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  // A throwaway directory of the test; as root, the unprivileged user PgBouncer switches to must read it.
  if (asRoot) chmodSync(dir, 0o755);
  const authFile = path.join(dir, 'userlist.txt');
  const iniFile = path.join(dir, 'pgbouncer.ini');
  // Plain-text passwords: PgBouncer checks clients with SCRAM against them and logs in to the
  // server with them when the server asks for a password.
  writeFileSync(authFile, users.map((u) => `${quote(u.name)} ${quote(u.password)}\n`).join(''), { mode: 0o644 });
  writeFileSync(
    iniFile,
    [
      '[databases]',
      // Any database name, on the upstream server. Server connections get the statement timeout
      // here, because PgBouncer does not forward it from clients' startup packets.
      `* = host=${upstream.hostname} port=${upstream.port || 5432} connect_query='SET statement_timeout = ${opts.statementTimeoutMillis}'`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'pool_mode = transaction',
      'auth_type = scram-sha-256',
      `auth_file = ${authFile}`,
      `default_pool_size = ${opts.poolSize}`,
      'max_client_conn = 1000',
      // node-postgres sends statement_timeout as a startup parameter; PgBouncer would refuse the login.
      'ignore_startup_parameters = statement_timeout',
      // Bound waits: a client waits at most this long for a server connection.
      'query_wait_timeout = 30',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const version = execFileSync(binary, ['--version'], { encoding: 'utf8' }).split('\n')[0]!.trim();
  const child: ChildProcess = spawn(binary, asRoot ? ['-u', unprivilegedUser(), iniFile] : [iniFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const collect = (d: Buffer) => {
    out = (out + d.toString()).slice(-200_000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    cleanup();
  };

  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) {
      cleanup();
      throw new Error(`pgbouncer exited with ${child.exitCode}: ${out}`);
    }
    if (await listening(port)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`pgbouncer did not listen on ${port}: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  return {
    port,
    version,
    url(database, user = admin) {
      const url = new URL(`postgres://127.0.0.1:${port}/`);
      url.username = encodeURIComponent(user.name);
      url.password = encodeURIComponent(user.password);
      url.pathname = `/${encodeURIComponent(database)}`;
      return url.toString();
    },
    output: () => out,
    stop,
  };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('connect', () => {
      socket.end();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
