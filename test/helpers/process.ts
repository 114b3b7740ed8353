import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { copyForAudit, testLogLevel } from './logs.js';
import { freePort } from './ports.js';

// A service run exactly as users run it: its own process, its entry file,
// configured by environment variables. Used by process-level tests and benches.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface ServiceProcess {
  url: string;
  port: number;
  child: ChildProcess;
  /** Everything the process printed so far (stdout and stderr). */
  output(): string;
  /** SIGTERM and wait for the exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: no shutdown work at all. */
  kill(): Promise<void>;
}

export async function startServiceProcess(
  entry: string,
  env: Record<string, string>,
  opts: { port?: number; keepOutput?: number; openFileLimit?: number } = {},
): Promise<ServiceProcess> {
  const port = opts.port ?? (await freePort());
  const argv = [process.execPath, '--import', 'tsx', path.join(root, entry)];
  // A lower open-file limit (ulimit -n) for tests of descriptor exhaustion; exec keeps
  // the pid, so signals still reach node itself.
  const [command, ...args] =
    opts.openFileLimit === undefined ? argv : ['bash', '-c', `ulimit -n ${Math.trunc(opts.openFileLimit)} && exec "$@"`, 'bash', ...argv];
  const child = spawn(command!, args, {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: testLogLevel('warn'), ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const keep = opts.keepOutput ?? 200_000;
  let out = '';
  const collect = (d: Buffer) => {
    copyForAudit(d);
    out = (out + d.toString()).slice(-keep);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${entry} exited with ${child.exitCode}: ${out}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${entry} did not become healthy: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    port,
    child,
    output: () => out,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

export interface SpawnedProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Both, in the order they came. */
  output(): string;
  /** Resolves with the exit code (null when a signal ended it). */
  exited: Promise<number | null>;
}

/**
 * An entry file of the repository run with node (through tsx) and exactly `env` as its
 * environment, for tests of how a process starts, refuses to start and stops. What it prints is
 * kept (and copied for the log audit).
 */
export function spawnEntry(entry: string, env: NodeJS.ProcessEnv, { detached = false }: { detached?: boolean } = {}): SpawnedProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, entry)], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached,
  });
  let out = '';
  let err = '';
  let both = '';
  child.stdout?.on('data', (d: Buffer) => {
    copyForAudit(d);
    out += d.toString();
    both += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    copyForAudit(d);
    err += d.toString();
    both += d.toString();
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    output: () => both,
    exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
  };
}

/**
 * `npm start` (src/dev/cli.ts) as its own process, with PATH and `env` as its whole environment,
 * leading a process group of its own as in a terminal: a signal to `-child.pid` is the terminal's
 * Ctrl-C, which reaches every process of that group.
 */
export function startLauncher(env: Record<string, string>): SpawnedProcess {
  return spawnEntry('src/dev/cli.ts', { PATH: process.env.PATH ?? '', ...env }, { detached: true });
}
