import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Writable } from 'node:stream';
import Fastify from 'fastify';
import type { LogLevel } from '../config.js';
import { DEADLINE_CHECK_INTERVAL_MS, DEFAULT_HTTP_LIMITS, defaultMaxConnections, type HttpLimits, type HttpSettings } from './limits.js';
import { serveApiDocs } from './api-docs.js';
import { limitConnections, limitPublicBodies } from './connections.js';
import { closeConnectionsWhileDraining } from './drain.js';
import type { ErrorBody } from './error-body.js';
import type { App } from './fastify-app.js';
import { answerErrors } from './error-handler.js';
import { serveHealth } from './health.js';
import { acceptJsonBodies } from './json-body-parser.js';
import { accessLog, loggerOptions } from './logging.js';
import { answerNotFound } from './not-found.js';
import { readRefusedBodies } from './oversized-body.js';
import { preRoutingErrorOptions } from './pre-routing-errors.js';
import { requestIdOf, sendRequestIds } from './request-id.js';
import { validateRequests } from './validation.js';
import { installMetrics, type MetricsOptions } from './metrics.js';
import type { ApiDocument } from './openapi.js';
import { lazyRequestLogger } from './request-logger.js';
import { registerSecurityHeaders } from './security-headers.js';
import { trustedProxy } from './trusted-proxy.js';

export type { ErrorBody } from './error-body.js';

// Routes, in every service: a route module exports Fastify plugins,
// `async function fooRoutes(app: App, deps: { … }): Promise<void>`, and the service's app.ts
// registers each with `await app.register(fooRoutes, { prefix?, ...deps })`, in the order that
// matters. A plugin is its own scope: the hooks it adds (authentication, a gateway, a body
// parser) apply to its own routes only.

export type { App } from './fastify-app.js';

export interface HttpAppOptions {
  title: string;
  description?: string;
  version?: string;
  logLevel?: LogLevel;
  /** Tests capture log lines here; otherwise stdout. */
  logStream?: Writable;
  /** false: no log line carries a client's address or port (default true). */
  logClientAddresses?: boolean;
  /** Comma-separated addresses or CIDRs of proxies whose X-Forwarded-For is believed. */
  trustProxy?: string;
  errorBody: ErrorBody;
  /** Throws when the service cannot serve (database unreachable). */
  readiness: () => Promise<void>;
  /** What /readyz says when readiness throws. */
  notReadyMessage?: string;
  bodyLimit?: number;
  /** GET /metrics: its protection and what it reports beyond requests (see metrics.ts). */
  metrics?: MetricsOptions;
  /** Timeouts, connection cap, HSTS: the common HTTP variables (httpSettings(config)); defaults otherwise. */
  http?: HttpSettings;
  /** Tags and security schemes of the OpenAPI document at /docs/json. */
  document?: ApiDocument;
  /**
   * Every answer of a documented route is checked against the document; a mismatch becomes a 500
   * naming it (OPENAPI_RESPONSE_CHECK, for tests; off by default). See checkResponsesAgainstDocument.
   */
  responseCheck?: boolean;
}

function parseTrustProxy(value: string | undefined): string[] | false {
  if (!value) return false;
  const list = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return list.length > 0 ? list : false;
}

/**
 * The one HTTP app factory: JSON only, the service's error envelope for
 * every error (validation, 404, malformed or oversized bodies, failures),
 * request ids, redacted JSON logs, health and readiness, OpenAPI at /docs.
 * Each concern lives in its own file under http/. It never listens:
 * server.ts does, so tests drive the same app with inject.
 */
export async function buildHttpApp(opts: HttpAppOptions): Promise<App> {
  const limits: HttpLimits = {
    ...DEFAULT_HTTP_LIMITS,
    maxConnections: defaultMaxConnections(),
    ...definedOnly(opts.http ?? {}),
  };
  const trustedProxies = parseTrustProxy(opts.trustProxy);
  const app: App = Fastify({
    logger: loggerOptions(opts.logLevel, opts.logStream, opts.logClientAddresses !== false),
    // One access line a request, at info, when it is answered (logging.ts).
    logController: accessLog(opts.logStream, opts.logClientAddresses !== false),
    // Node's deadlines, absolute from a request's first byte, so a client that
    // trickles bytes cannot extend them. A header deadline above the request
    // deadline would mean nothing: Node would swap them.
    http: {
      headersTimeout: Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs),
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: DEADLINE_CHECK_INTERVAL_MS,
    },
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // No connectionTimeout (an inactivity timeout on the socket): it would also
    // cut a request whose handler is still working (waiting on the database up
    // to its query timeout) without an answer; the deadlines above cover clients.
    bodyLimit: opts.bodyLimit ?? 64 * 1024,
    // The same check Fastify would compile from the list, faster for plain IPv4 (trusted-proxy.ts).
    trustProxy: trustedProxies ? trustedProxy(trustedProxies) : false,
    // Each request's child logger is made on its first line written (request-logger.ts).
    childLoggerFactory: lazyRequestLogger,
    requestIdHeader: false,
    genReqId: requestIdOf,
    // Only the pieces of an URL a router needs; everything else 404s.
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 200 },
    forceCloseConnections: 'idle',
    ...preRoutingErrorOptions(opts.errorBody, () => app.log, opts.logClientAddresses !== false),
    // While draining, a request on an already open connection is served (and
    // told to close the connection) rather than refused with a bare 503.
    return503OnClosing: false,
  }).withTypeProvider<TypeBoxTypeProvider>();

  const connections = limitConnections(
    app,
    { max: limits.maxConnections, maxPerClient: limits.maxConnectionsPerClient, trustProxy: trustedProxies || [] },
    opts.errorBody,
  );
  limitPublicBodies(app, limits.publicBodyTimeoutMs, opts.errorBody);
  validateRequests(app);
  acceptJsonBodies(app);
  readRefusedBodies(app);
  closeConnectionsWhileDraining(app, connections);
  sendRequestIds(app);
  answerNotFound(app, opts.errorBody);
  answerErrors(app, opts.errorBody);
  installMetrics(app, opts.errorBody, opts.metrics);
  await registerSecurityHeaders(app, { hstsMaxAge: opts.http?.hstsMaxAge });
  await serveApiDocs(app, opts);
  serveHealth(app, { ...opts, connections });
  return app;
}

/** The settings given, without the ones left undefined (which keep their defaults). */
function definedOnly(settings: HttpSettings): Partial<HttpLimits> {
  const { hstsMaxAge: _hsts, ...limits } = settings;
  return Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined)) as Partial<HttpLimits>;
}
