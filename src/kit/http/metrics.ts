import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Pool } from '../db.js';
import type { ErrorBody } from './error-body.js';
import type { App } from './fastify-app.js';

// Prometheus metrics of a service, served at GET /metrics on the service's own
// port. Every label value comes from a fixed set (route templates, status
// classes, names chosen in code): nothing a client sends ever becomes a label,
// so the number of series stays bounded whatever the traffic.

// Kept beside the app rather than declared on FastifyInstance, as identities are beside requests (identity.ts).
const registries = new WeakMap<object, Registry>();

/** This app's metrics registry: services register their own figures here. */
export function metricsRegistry(app: App): Registry {
  // A plugin's scope is an object created from its parent's, so the app it belongs to is up its prototype chain.
  for (let scope: object | null = app; scope !== null; scope = Object.getPrototypeOf(scope)) {
    const registry = registries.get(scope);
    if (registry) return registry;
  }
  throw new Error('metricsRegistry() on an app not built by buildHttpApp');
}

export interface MetricsOptions {
  /**
   * When set, /metrics answers only requests carrying `Authorization: Bearer <token>`,
   * from anywhere. When unset, it answers only loopback clients that came through no proxy.
   */
  token?: string;
  /** The connection pools to report, by the name they get in the `pool` label. */
  pools?: Record<string, Pool>;
  /** The registry to fill; a service passes one when it must create metrics before its server. */
  registry?: Registry;
}

/** The route label of requests that matched no route (404s, malformed URLs). */
export const UNMATCHED_ROUTE = 'unmatched';

export const createMetricsRegistry = (): Registry => new Registry();

// The process figures (CPU, memory, event loop, GC) describe the process, not
// an app: they are collected once, into a registry of their own, and appended
// to every app's answer. Collecting them per app would start one event-loop
// monitor and one GC observer per app, never stopped (tests build many apps).
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

const statusClass = (status: number) => `${Math.floor(status / 100)}xx`;

/** Gauges of each pool, read from the pool when scraped (so they cost nothing between scrapes). */
function registerPoolGauges(registry: Registry, pools: Record<string, Pool>): void {
  const entries = Object.entries(pools);
  if (entries.length === 0) return;
  new Gauge({
    name: 'db_pool_connections',
    help: 'Connections of the PostgreSQL pool, by state: in_use (checked out) or idle.',
    labelNames: ['pool', 'state'] as const,
    registers: [registry],
    collect() {
      for (const [name, pool] of entries) {
        this.set({ pool: name, state: 'in_use' }, pool.totalCount - pool.idleCount);
        this.set({ pool: name, state: 'idle' }, pool.idleCount);
      }
    },
  });
  new Gauge({
    name: 'db_pool_waiting_requests',
    help: 'Queries waiting for a connection of the PostgreSQL pool.',
    labelNames: ['pool'] as const,
    registers: [registry],
    collect() {
      for (const [name, pool] of entries) this.set({ pool: name }, pool.waitingCount);
    },
  });
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/** True when the Authorization header carries exactly the token; the comparison takes the same time whatever it holds. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const given = /^Bearer (.+)$/i.exec(header ?? '')?.[1] ?? '';
  // Digests have the same length whatever was sent, which timingSafeEqual needs.
  return timingSafeEqual(digest(given), digest(token)) && given.length > 0;
}

function isLoopback(address: string): boolean {
  if (isIP(address) === 4) return address.startsWith('127.');
  return address === '::1' || address.startsWith('::ffff:127.');
}

/**
 * Per-request duration by route template and status class, the pool gauges,
 * and GET /metrics with its protection. Called by buildHttpApp before any
 * route is added; the registry is `metricsRegistry(app)`.
 */
export function installMetrics(app: App, errorBody: ErrorBody, opts: MetricsOptions = {}): void {
  const registry = opts.registry ?? createMetricsRegistry();
  registries.set(app, registry);
  registerPoolGauges(registry, opts.pools ?? {});

  const durations = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from request to response, by method, route template (never the raw URL) and status class.',
    labelNames: ['method', 'route', 'status_class'] as const,
    registers: [registry],
  });
  app.addHook('onResponse', (request, reply, done) => {
    durations.observe(
      {
        method: request.method,
        // The template the router matched (`/api/links/:code`); undefined for the not-found handler.
        route: request.routeOptions.url ?? UNMATCHED_ROUTE,
        status_class: statusClass(reply.statusCode),
      },
      reply.elapsedTime / 1000,
    );
    done();
  });

  const refuse = (request: FastifyRequest, reply: FastifyReply) => {
    // The same answer as a path that does not exist: nothing tells a stranger metrics are here.
    return reply.code(404).send(errorBody(404, `Route ${request.method} ${request.url.split('?')[0]} not found`));
  };

  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (opts.token !== undefined) {
      if (!bearerMatches(request.headers.authorization, opts.token)) {
        return reply.code(401).header('www-authenticate', 'Bearer').send(errorBody(401, 'Metrics need a valid bearer token'));
      }
    } else if (
      !isLoopback(request.ip) ||
      // A reverse proxy on the same host makes every client look local unless
      // TRUST_PROXY names it: a forwarded request is never taken as local.
      request.headers['x-forwarded-for'] !== undefined ||
      request.headers.forwarded !== undefined
    ) {
      return refuse(request, reply);
    }
    const text = (await processMetrics().metrics()) + (await registry.metrics());
    return reply.header('content-type', registry.contentType).header('cache-control', 'no-store').send(text);
  });
}
