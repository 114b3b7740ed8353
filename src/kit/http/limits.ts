import { readFileSync } from 'node:fs';
import { STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { rateLimitKey } from './client-ip.js';

// How long a client may take and how many connections a process holds. A
// connection that sends part of a request and then nothing would otherwise be
// held forever, and enough of them use up the process's file descriptors: the
// next connection to PostgreSQL then fails with EMFILE while /healthz, served
// on an open connection, still says 200.

export interface HttpLimits {
  /** Deadline for the header section of a request, from its first byte. */
  headersTimeoutMs: number;
  /** Deadline for the whole request (headers and body), from its first byte. */
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection is kept. */
  keepAliveTimeoutMs: number;
  /** Connections open at once; a new one beyond them is answered 503 and closed. */
  maxConnections: number;
  /**
   * Connections one client (an IPv4 address, an IPv6 /64) may hold at once; beyond them its new one is
   * answered 503 and closed, so one client cannot hold every connection. 0: a quarter of maxConnections.
   * Proxies named in TRUST_PROXY carry many clients' connections and are exempt.
   */
  maxConnectionsPerClient: number;
  /**
   * Deadline for the body of a request that carries no credentials (no Authorization or apikey
   * header), from the end of its headers: the public routes (sign-up, login, create) are where a
   * client with nothing to lose stalls bodies. Requests with credentials keep requestTimeoutMs.
   */
  publicBodyTimeoutMs: number;
}

/**
 * Node checks the header and request deadlines of open connections on a timer,
 * every 30 s by default: a 10 s deadline would then close a stalled connection
 * after up to 40 s. Each check walks the list of requests in progress only.
 */
export const DEADLINE_CHECK_INTERVAL_MS = 500;

/**
 * Descriptors kept free below the open-file limit for everything that is not a
 * client connection: the database pool, Redis, log output, and the refusals in
 * flight (REFUSALS_IN_FLIGHT).
 */
export const DESCRIPTORS_KEPT_FREE = 256;
/** Connections whose 503 is being written at once; beyond them a new connection is closed without one. */
export const REFUSALS_IN_FLIGHT = 128;
/** How long a refused connection has to read its 503 before it is closed anyway. */
const REFUSAL_GRACE_MS = 1000;
const DEFAULT_MAX_CONNECTIONS_CAP = 4096;
const DEFAULT_MAX_CONNECTIONS_UNKNOWN_LIMIT = 1000;

/** The soft open-file limit of this process (ulimit -n), where the platform says it (Linux). */
export function openFileLimit(): number | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    if (soft === 'unlimited') return Number.POSITIVE_INFINITY;
    const value = Number(soft);
    return Number.isInteger(value) && value > 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The open-file limit less what the process needs besides client connections
 * (768 under the common 1,024), at most 4,096; 1,000 where the limit is unknown.
 */
export function defaultMaxConnections(): number {
  const limit = openFileLimit();
  if (limit === undefined) return DEFAULT_MAX_CONNECTIONS_UNKNOWN_LIMIT;
  return Math.max(64, Math.min(DEFAULT_MAX_CONNECTIONS_CAP, limit - DESCRIPTORS_KEPT_FREE));
}

export const DEFAULT_HTTP_LIMITS: Omit<HttpLimits, 'maxConnections'> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 72_000,
  maxConnectionsPerClient: 0,
  publicBodyTimeoutMs: 10_000,
};

/** A complete HTTP/1.1 response for a socket no request object answers (refused, or refused by the parser). */
export function rawHttpResponse(status: number, body: unknown, headers: Record<string, string> = {}): string {
  const text = JSON.stringify(body);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(text)}`,
    'X-Content-Type-Options: nosniff',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
  ];
  return `${lines.join('\r\n')}\r\n\r\n${text}`;
}

export interface ConnectionCap {
  /** Client connections open now (refused ones not counted). */
  open(): number;
  readonly max: number;
  /**
   * Ends every connection with no response in progress: one that never sent a request, one
   * still sending its header section, one idle between requests. Used while draining.
   */
  closeUnused(): void;
}

/** What Node's HTTP server keeps on a socket: the response being written on it, if any. */
type ServedSocket = Socket & { _httpMessage?: { writableEnded: boolean } | null };

/**
 * Holds at most `max` connections. A connection beyond them is accepted, told
 * `refusal()` (a 503) and closed, rather than dropped without a word, so the
 * client knows to retry. The refusals themselves are bounded
 * (REFUSALS_IN_FLIGHT); beyond them Node closes a new connection at once.
 */
export function capConnections(
  server: Server,
  { max, maxPerClient, exempt }: { max: number; maxPerClient: number; exempt: (address: string | undefined) => boolean },
  refusal: () => string,
): ConnectionCap {
  // The HTTP server's own 'connection' listener is called only for connections within the cap.
  const serve = server.listeners('connection') as Array<(this: Server, socket: Socket) => void>;
  server.removeAllListeners('connection');
  server.maxConnections = max + REFUSALS_IN_FLIGHT;
  const sockets = new Set<ServedSocket>();
  const perClient = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    if (sockets.size >= max) {
      refuse(socket, refusal());
      return;
    }
    const client = exempt(socket.remoteAddress) ? undefined : rateLimitKey(socket.remoteAddress);
    if (client !== undefined) {
      const held = perClient.get(client) ?? 0;
      if (held >= maxPerClient) {
        refuse(socket, refusal());
        return;
      }
      perClient.set(client, held + 1);
    }
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (client === undefined) return;
      const held = perClient.get(client)! - 1;
      if (held === 0) perClient.delete(client);
      else perClient.set(client, held);
    });
    for (const listener of serve) listener.call(server, socket);
  });
  const closeUnused = () => {
    for (const socket of sockets) {
      const response = socket._httpMessage;
      if (response && !response.writableEnded) continue;
      // A response already ended may still be on its way out: let it go first.
      if (socket.writableLength > 0) socket.end(() => socket.destroy());
      else socket.destroy();
    }
  };
  return { open: () => sockets.size, max, closeUnused };
}

function refuse(socket: Socket, response: string): void {
  socket.on('error', () => {});
  // What the client sends is read and discarded: closing a socket with unread
  // input resets the connection, and the client could lose the 503 with it.
  socket.resume();
  socket.end(response);
  const grace = setTimeout(() => socket.destroy(), REFUSAL_GRACE_MS);
  socket.once('close', () => clearTimeout(grace));
}

/** What buildHttpApp takes from the common HTTP variables (httpVars in config.ts). */
export interface HttpSettings extends Partial<HttpLimits> {
  /** Strict-Transport-Security max-age in seconds; 0 or absent: none. */
  hstsMaxAge?: number;
}

/** The names of the common HTTP variables, for services' config types. */
export type HttpVariable =
  | 'HTTP_HEADERS_TIMEOUT_MS'
  | 'HTTP_REQUEST_TIMEOUT_MS'
  | 'HTTP_PUBLIC_BODY_TIMEOUT_MS'
  | 'HTTP_KEEP_ALIVE_TIMEOUT_MS'
  | 'HTTP_MAX_CONNECTIONS'
  | 'HTTP_MAX_CONNECTIONS_PER_CLIENT'
  | 'HSTS_MAX_AGE';

export function httpSettings(config: Record<HttpVariable, number>): HttpSettings {
  return {
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    maxConnections: config.HTTP_MAX_CONNECTIONS,
    maxConnectionsPerClient: config.HTTP_MAX_CONNECTIONS_PER_CLIENT,
    publicBodyTimeoutMs: config.HTTP_PUBLIC_BODY_TIMEOUT_MS,
    hstsMaxAge: config.HSTS_MAX_AGE,
  };
}
