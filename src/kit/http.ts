import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Writable } from 'node:stream';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Ajv, type Options as AjvOptions } from 'ajv';
import addFormatsModule from 'ajv-formats';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { classifyError, descriptorsExhaustedRecently, isDescriptorExhaustion, noteDescriptorExhaustion } from './classify-error.js';
import type { LogLevel } from './config.js';
import { HttpError, badRequest } from './errors.js';
import { parseJsonBody } from './json-body.js';
import { installMetrics, type MetricsOptions } from './metrics.js';
import {
  capConnections,
  DEADLINE_CHECK_INTERVAL_MS,
  DEFAULT_HTTP_LIMITS,
  defaultMaxConnections,
  type HttpLimits,
  type HttpSettings,
  rawHttpResponse,
} from './http-limits.js';
import { serializeRequest } from './log-redaction.js';
import { type ApiDocument, checkResponsesAgainstDocument, documentResponses } from './openapi.js';
import { watchRequestStream } from './request-stream.js';
import { docsContentSecurityPolicy, registerSecurityHeaders } from './security-headers.js';

export type App = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxTypeProvider>;

/** The body every error of a service is sent in; each spec fixes its own shape. */
export type ErrorBody = (status: number, message: string) => Record<string, unknown>;

/** `{status, response, message}`: the envelope of the accounts and shortener specs. */
export const statusEnvelope: ErrorBody = (status, message) => ({
  status,
  response: STATUS_CODES[status] ?? 'Error',
  message,
});

export interface ServerOptions {
  title: string;
  description?: string;
  version?: string;
  logLevel?: LogLevel;
  /** Tests capture log lines here; otherwise stdout. */
  logStream?: Writable;
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
}

// Anything that can carry a credential is removed from log lines wherever it appears.
const REDACT = [
  'authorization',
  '*.authorization',
  'req.headers.authorization',
  'req.headers.apikey',
  'req.headers.cookie',
  'password',
  'token',
  'access_token',
  'refresh_token',
  'secret',
  '*.password',
  '*.token',
  '*.access_token',
  '*.refresh_token',
  '*.secret',
];

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function makeAjv(opts: AjvOptions): Ajv {
  const ajv = new Ajv({ removeAdditional: true, useDefaults: true, allErrors: false, ...opts });
  addFormats(ajv);
  // TypeBox schemas carry these keywords.
  ajv.addKeyword({ keyword: 'kind' });
  ajv.addKeyword({ keyword: 'modifier' });
  return ajv;
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
 * The one HTTP server factory: JSON only, the service's error envelope for
 * every error (validation, 404, malformed or oversized bodies, failures),
 * request ids, redacted JSON logs, health and readiness, OpenAPI at /docs.
 * It never listens: server.ts does, so tests drive the same app with inject.
 */
export async function createServer(opts: ServerOptions): Promise<App> {
  const limits: HttpLimits = {
    ...DEFAULT_HTTP_LIMITS,
    maxConnections: defaultMaxConnections(),
    ...definedOnly(opts.http ?? {}),
  };
  const app = Fastify({
    logger: {
      level: opts.logLevel ?? 'info',
      redact: { paths: REDACT, censor: '[redacted]' },
      // Query strings may carry credentials (?apikey=…): logged URLs are redacted.
      serializers: { req: serializeRequest },
      ...(opts.logStream ? { stream: opts.logStream } : {}),
    },
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
    trustProxy: parseTrustProxy(opts.trustProxy),
    // No requestIdHeader: with one, Fastify takes the header as is and never calls
    // genReqId, which is where a client-supplied id is checked.
    requestIdHeader: false,
    // A client-supplied id is kept only when it looks like an id, so logs cannot be forged.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{1,64}$/.test(given) ? given : randomUUID();
    },
    // Only the pieces of an URL a router needs; everything else 404s.
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 200 },
    forceCloseConnections: 'idle',
    // Errors Fastify answers before routing (an undecodable %-escape, an
    // over-long path parameter) get the service's envelope like any other.
    frameworkErrors: (err, _request, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400;
      void (reply as FastifyReply).code(status).send(opts.errorBody(status, status === 414 ? 'URI too long' : 'Malformed URL'));
    },
    // Requests the HTTP parser refuses (bad Content-Length, broken request
    // line, oversized headers): an enveloped answer, and the connection is
    // closed, as the client must be told since the socket is destroyed after.
    // A request past its header or request deadline arrives here too (408).
    clientErrorHandler: (err, socket) => {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ECONNRESET' || socket.destroyed) return;
      const status = code === 'HPE_HEADER_OVERFLOW' ? 431 : code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
      if (status === 408) app.log.info({ remoteAddress: socket.remoteAddress }, 'request not complete by its deadline: 408, connection closed');
      // Once a response has begun on this socket, another one would corrupt it.
      const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
      if (socket.writable && !answering) {
        socket.write(rawHttpResponse(status, opts.errorBody(status, STATUS_CODES[status] ?? 'Bad Request')));
      }
      socket.destroy();
    },
    // While draining, a request on an already open connection is served (and
    // told to close the connection) rather than refused with a bare 503.
    return503OnClosing: false,
  }).withTypeProvider<TypeBoxTypeProvider>();

  const connections = capConnections(app.server, limits.maxConnections, () =>
    rawHttpResponse(503, opts.errorBody(503, 'Too many connections, try again shortly'), { 'Retry-After': '1' }),
  );
  // Accepting a connection fails with EMFILE when descriptors run out (libuv
  // usually absorbs it; when it does not, an unhandled server error would end
  // the process). /readyz reports it for a while.
  app.server.on('error', (err: NodeJS.ErrnoException) => {
    if (err.syscall !== 'accept') return;
    if (isDescriptorExhaustion(err)) noteDescriptorExhaustion();
    app.log.warn({ err: { message: err.message, code: err.code } }, 'could not accept a connection');
  });

  // Bodies are validated strictly (a number is not a string); query strings and
  // path params arrive as text, so those are coerced to the declared types.
  const bodyAjv = makeAjv({ coerceTypes: false });
  const textAjv = makeAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'body') return bodyAjv.compile(schema as object);
    const validate = textAjv.compile(schema as object);
    // Coercion turns the text "1e400" into Infinity, which Ajv then exempts from
    // minimum/maximum: a query like ?page=1e400 must fail here, not in SQL.
    const check = (data: unknown) => {
      if (!validate(data)) {
        check.errors = validate.errors;
        return false;
      }
      for (const [key, value] of Object.entries((data ?? {}) as Record<string, unknown>)) {
        if (typeof value === 'number' && !Number.isFinite(value)) return { error: badRequest(`${httpPart}/${key} must be a finite number`) };
      }
      return true;
    };
    check.errors = validate.errors;
    return check;
  });

  // JSON is the only request body this project accepts, read by the kit's parser so that each
  // refusal says what is wrong (Fastify's calls a body with a `__proto__` key "not valid JSON").
  app.removeContentTypeParser(['text/plain', 'application/json']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(typeof body === 'string' ? body : body.toString('utf8')));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  // A keep-alive connection whose request is in flight when close() starts
  // would stay open after its response until the idle timeout, holding the
  // drain for as long: such responses tell the client to close instead.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });

  // Before anything reads the body: an error of the request stream is then known to be the client's.
  app.addHook('onRequest', (request, _reply, done) => {
    watchRequestStream(request.raw);
    done();
  });

  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
    if (closing) reply.header('connection', 'close');
  });

  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(opts.errorBody(404, `Route ${request.method} ${request.url.split('?')[0]} not found`));
  });

  app.setErrorHandler((err: FastifyError | HttpError | Error, request, reply) => {
    if (err instanceof HttpError) {
      void reply.code(err.statusCode).headers(err.headers).send(opts.errorBody(err.statusCode, err.message));
      return;
    }
    const fe = err as FastifyError;
    if (fe.validation) {
      void reply.code(400).send(opts.errorBody(400, fe.message));
      return;
    }
    const kind = classifyError(err);
    switch (kind.kind) {
      case 'client-gone': {
        // Nobody reads this answer; the status only closes the request's log line.
        request.log.info('client closed the connection before the request was complete');
        const status = fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500 ? fe.statusCode : 400;
        void reply.code(status).send(opts.errorBody(status, 'Request not complete'));
        return;
      }
      case 'client-error':
        // Fastify's own client errors (bad JSON, 413, 415) have safe messages.
        void reply.code(kind.status).send(opts.errorBody(kind.status, fe.message));
        return;
      case 'unavailable':
        request.log.warn(
          { err: { message: err.message, code: (err as { code?: string }).code } },
          kind.cause === 'database' ? 'database unavailable' : 'out of file descriptors',
        );
        void reply.code(503).header('retry-after', '1').send(opts.errorBody(503, 'Service temporarily unavailable, try again shortly'));
        return;
      case 'internal':
        request.log.error({ err }, 'unhandled error');
        void reply.code(500).send(opts.errorBody(500, 'Internal Server Error'));
    }
  });

  installMetrics(app, opts.errorBody, opts.metrics);
  await registerSecurityHeaders(app, { hstsMaxAge: opts.http?.hstsMaxAge });

  await app.register(swagger, {
    openapi: {
      info: { title: opts.title, description: opts.description, version: opts.version ?? '1.0.0' },
      tags: [...(opts.document?.tags ?? []), { name: 'health', description: 'Liveness and readiness' }],
      ...(opts.document?.securitySchemes && { components: { securitySchemes: opts.document.securitySchemes } }),
    },
    transform: documentResponses(opts.errorBody),
  });
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true, transformStaticCSP: docsContentSecurityPolicy });
  if (process.env.OPENAPI_RESPONSE_CHECK === '1') checkResponsesAgainstDocument(app);

  const Health = Type.Object({ status: Type.String() });
  app.get('/healthz', { schema: { tags: ['health'], summary: 'Liveness: the process answers', response: { 200: Health } } }, async () => ({ status: 'ok' }));
  app.get(
    '/readyz',
    {
      schema: {
        tags: ['health'],
        summary: 'Readiness: the service can serve (its database or provider answers, connections and descriptors to spare)',
        response: { 200: Health, 503: Type.Object({}, { additionalProperties: true }) },
      },
    },
    async (request, reply) => {
      // Saturation first: a readiness check of the database would itself need a descriptor.
      const saturated =
        connections.open() >= connections.max
          ? 'Service not ready: at its connection limit'
          : descriptorsExhaustedRecently()
            ? 'Service not ready: out of file descriptors'
            : undefined;
      if (saturated) {
        request.log.warn({ connections: connections.open(), max: connections.max }, saturated);
        return reply.code(503).header('retry-after', '1').send(opts.errorBody(503, saturated));
      }
      try {
        await opts.readiness();
        return { status: 'ready' };
      } catch (err) {
        request.log.warn({ err: { message: (err as Error).message } }, 'not ready');
        return reply.code(503).send(opts.errorBody(503, opts.notReadyMessage ?? 'Service not ready: database unreachable'));
      }
    },
  );

  return app;
}

/** The settings given, without the ones left undefined (which keep their defaults). */
function definedOnly(settings: HttpSettings): Partial<HttpLimits> {
  const { hstsMaxAge: _hsts, ...limits } = settings;
  return Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined)) as Partial<HttpLimits>;
}
