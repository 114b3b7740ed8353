// Ports on 127.0.0.1 for tests: one that is free, and a forwarder that makes a port reachable later.
import { once } from 'node:events';
import net from 'node:net';

/** A port nothing listens on right now (it was free a moment ago): for a service to listen on, or to find closed. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
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
