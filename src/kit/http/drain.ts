import type { FastifyInstance } from 'fastify';
import type { ConnectionCap } from './limits.js';

/** How often, while draining, connections with nothing in flight are looked for and ended. */
const UNUSED_SWEEP_MS = 100;

/**
 * A keep-alive connection whose request is in flight when close() starts
 * would stay open after its response until the idle timeout, holding the
 * drain for as long: such responses tell the client to close instead.
 * (Fastify's return503OnClosing is off, so a request on an already open
 * connection is still served while draining.)
 */
export function closeConnectionsWhileDraining(app: FastifyInstance, connections: ConnectionCap): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    // Node's server.close() ends idle keep-alive connections only: one that has sent nothing
    // counts as awaiting its headers, and once the listener is closed no deadline ends it. A
    // browser's preconnected socket (or an attacker's) would hold the drain until the process
    // is killed. So while draining, every connection with no response in progress is ended;
    // requests in flight are served.
    const sweep = setInterval(() => {
      connections.closeUnused();
      if (connections.open() === 0) clearInterval(sweep);
    }, UNUSED_SWEEP_MS);
    sweep.unref();
  });
  // A callback hook, not an async one: an async hook costs every request a promise.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
}
