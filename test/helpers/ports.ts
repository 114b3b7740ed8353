// Ports on 127.0.0.1 for tests: one that is free, and a forwarder that makes a port reachable later.
import { once } from 'node:events';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isOurProcessRunning } from '../../src/dev/processes.js';

// The kernel hands a port that was just closed to the next caller that asks, in this process or
// in another test file running beside it. Two files would then start services on one port, and
// one launcher's health check could be answered by the other's service. So every port handed out
// is also claimed in a directory all test processes share (a file created exclusively, naming
// the claiming process); a port another live process claimed is drawn again. Claims go when
// their process exits, and a dead process's claims are taken over.
const CLAIMS = path.join(tmpdir(), 'svc-test-port-claims');
const claimed: string[] = [];
process.once('exit', () => {
  for (const file of claimed) rmSync(file, { force: true });
});

function claim(port: number): boolean {
  mkdirSync(CLAIMS, { recursive: true });
  const file = path.join(CLAIMS, String(port));
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' });
    claimed.push(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const owner = Number.parseInt(readFileSync(file, 'utf8'), 10);
  if (owner === process.pid || (Number.isInteger(owner) && isOurProcessRunning(owner))) return false;
  rmSync(file, { force: true });
  return claim(port);
}

async function unclaimedPort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

/**
 * A port nothing listens on right now (it was free a moment ago), and that no other test process
 * (nor this one before) was given: for a service to listen on, or to find closed.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await unclaimedPort();
    if (claim(port)) return port;
  }
}

/** `count` free ports, all different (the kernel may hand the same free port to two calls in a row). */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/** The same: a port where a connection is refused, for a dependency that is down. */
export const closedPort = freePort;

/** A TCP forwarder on a fixed port to `target`: makes a closed port reachable later. */
export async function forwardPort(port: number, target: string): Promise<{ close(): Promise<void> }> {
  const { hostname, port: targetPort } = new URL(target);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(targetPort), hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return {
    async close() {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
