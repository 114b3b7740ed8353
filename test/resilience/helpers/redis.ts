import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import { waitUntil } from './http.js';
import { freePort } from '../../helpers/ports.js';

// A redis-server of the test's own on a free port, without persistence, that
// the test may kill and start again on the same port. The machine's Redis is
// shared with other tests and never touched.

export interface PrivateRedis {
  url: string;
  port: number;
  running(): boolean;
  /** SIGKILL: Redis vanishes without a goodbye, as in a crash. */
  kill(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setTimeout(500, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      socket.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
    socket.on('error', () => resolve(false));
  });
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let output = '';
  const start = async () => {
    if (child) return;
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    proc.stdout?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
    proc.stderr?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    await waitUntil(
      async () => {
        if (proc.exitCode !== null) throw new Error(`redis-server exited: ${output}`);
        return ping(port);
      },
      10_000,
      'redis-server to answer PING',
    );
  };
  const kill = async () => {
    if (!child) return;
    child.kill('SIGKILL');
    await exited;
    child = undefined;
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, port, running: () => child !== undefined, kill, start, destroy: kill };
}
