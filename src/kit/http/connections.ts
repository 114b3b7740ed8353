import type { IncomingHttpHeaders } from 'node:http';
import { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import ipaddr from 'ipaddr.js';
import { isDescriptorExhaustion, noteDescriptorExhaustion } from './classify-error.js';
import { canonicalIp } from './client-ip.js';
import type { ErrorBody } from './error-body.js';
import { type ConnectionCap, capConnections, rawHttpResponse } from './limits.js';

/**
 * At most `max` open connections, and at most `maxPerClient` of them from one client (addresses named
 * in TRUST_PROXY exempt: a proxy carries everyone's); more are refused with a 503. A failed accept (out
 * of file descriptors) is logged and remembered for /readyz instead of ending the process.
 */
export function limitConnections(
  app: FastifyInstance,
  { max, maxPerClient, trustProxy }: { max: number; maxPerClient: number; trustProxy: string[] },
  errorBody: ErrorBody,
): ConnectionCap {
  const connections = capConnections(
    app.server,
    { max, maxPerClient: maxPerClient > 0 ? maxPerClient : Math.max(1, Math.floor(max / 4)), exempt: addressMatcher(trustProxy) },
    () => rawHttpResponse(503, errorBody(503, 'Too many connections, try again shortly'), { 'Retry-After': '1' }),
  );
  // Accepting a connection fails with EMFILE when descriptors run out (libuv
  // usually absorbs it; when it does not, an unhandled server error would end
  // the process). /readyz reports it for a while.
  app.server.on('error', (err: NodeJS.ErrnoException) => {
    if (err.syscall !== 'accept') return;
    if (isDescriptorExhaustion(err)) noteDescriptorExhaustion();
    app.log.warn({ err: { message: err.message, code: err.code } }, 'could not accept a connection');
  });
  return connections;
}

/** Whether an address is one of `list` (addresses or CIDR ranges, as TRUST_PROXY names them). */
function addressMatcher(list: string[]): (address: string | undefined) => boolean {
  const ranges = list.flatMap((entry): Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> => {
    try {
      if (entry.includes('/')) return [ipaddr.parseCIDR(entry)];
      const address = ipaddr.parse(entry);
      return [[address, address.kind() === 'ipv4' ? 32 : 128]];
    } catch {
      return [];
    }
  });
  if (ranges.length === 0) return () => false;
  return (address) => {
    const canonical = canonicalIp(address);
    if (canonical === undefined) return false;
    const parsed = ipaddr.parse(canonical);
    return ranges.some(([range, bits]) => parsed.kind() === range.kind() && parsed.match(range, bits));
  };
}

/**
 * A body that has not fully arrived `timeoutMs` after the headers of a request with no credentials
 * (no Authorization or apikey header) gets a 408 and the connection is closed, as Node does at the
 * whole-request deadline: the public routes are where a client with nothing to lose stalls bodies, and
 * each stalled body holds a connection. It runs from the first hook, so a body that nothing reads (a
 * request refused before its body, e.g. rate limited) is bounded the same way.
 */
export function limitPublicBodies(app: FastifyInstance, timeoutMs: number, errorBody: ErrorBody): void {
  // A callback hook, not an async one, and nothing armed for a request without a body (every GET
  // of a redirect): an async hook and a timer with two listeners cost each request a few µs.
  app.addHook('onRequest', (request, reply, done) => {
    const raw = request.raw;
    if (!announcesBody(raw.headers) || request.headers.authorization !== undefined || request.headers.apikey !== undefined) {
      return done();
    }
    // An injected request (app.inject) has no connection to hold.
    if (raw.complete || !(raw.socket instanceof Socket)) return done();
    const timer = setTimeout(() => {
      if (raw.complete) return;
      request.log.info({ event: 'body_timeout' }, 'request body not received in time');
      const socket = raw.socket;
      if (reply.sent || reply.raw.headersSent) socket.destroy();
      else {
        socket.end(rawHttpResponse(408, errorBody(408, 'Request body not received in time')));
        socket.destroySoon();
      }
    }, timeoutMs);
    timer.unref();
    const clear = () => clearTimeout(timer);
    raw.once('end', clear);
    raw.once('close', clear);
    done();
  });
}

/**
 * Whether a request carries a body by HTTP/1.1's framing (RFC 9112, section 6.3): only a
 * Transfer-Encoding or a Content-Length above zero announces one; without them Node's parser
 * reads no body, so there is nothing to stall.
 */
function announcesBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
