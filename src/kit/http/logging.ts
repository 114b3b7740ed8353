import { hostname } from 'node:os';
import type { Writable } from 'node:stream';
import { type FastifyReply, type FastifyRequest, type FastifyServerOptions, LogController } from 'fastify';
import { type DestinationStream, pino } from 'pino';
import type { LogLevel } from '../config.js';
import { serializeRequest, serializeRequestWithoutClient } from './log-redaction.js';
import { isLevelEnabled } from './request-logger.js';

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

let standardOutput: DestinationStream | undefined;

/** The most log output held in memory while standard output does not take it; lines beyond it are dropped. */
export const LOG_BUFFER_LIMIT_BYTES = 16 * 1024 * 1024;

/** Lines gather until this many bytes are waiting before they are written... */
export const LOG_BATCH_BYTES = 4096;
/** ...or until this much time has passed: a line reaches standard output at most this late. */
export const LOG_FLUSH_INTERVAL_MS = 100;

/**
 * Where a process's log lines go unless a test captures them: standard output, written
 * asynchronously and in batches. A synchronous write made every logged request wait for its own
 * write system call; an asynchronous write of each line as it came still cost a write through
 * libuv's thread pool per line at ordinary traffic (about 21 µs of CPU a line on the bench machine,
 * against 7 batched: `npm run bench logging`). So lines gather until LOG_BATCH_BYTES are waiting or
 * LOG_FLUSH_INTERVAL_MS have passed, then go out in one write. pino writes what is still buffered
 * synchronously when the process exits (also on an uncaught exception); a process killed with
 * SIGKILL can lose its last LOG_FLUSH_INTERVAL_MS of lines. One destination for the whole process,
 * so the service's own lines and its requests' stay in order. When whatever reads standard output
 * stops reading, at most LOG_BUFFER_LIMIT_BYTES wait in memory and later lines are dropped: a stuck
 * log reader must not grow the service without bound, nor stop it answering.
 */
export function logDestination(): DestinationStream {
  standardOutput ??= pino.destination({
    dest: 1,
    sync: false,
    minLength: LOG_BATCH_BYTES,
    periodicFlush: LOG_FLUSH_INTERVAL_MS,
    maxLength: LOG_BUFFER_LIMIT_BYTES,
  });
  return standardOutput;
}

/**
 * JSON log lines with credentials redacted, to `stream` (tests capture them) or stdout;
 * without the client's address and port when `clientAddresses` is false.
 */
export function loggerOptions(
  level: LogLevel | undefined,
  stream: Writable | undefined,
  clientAddresses = true,
): FastifyServerOptions['logger'] {
  return {
    level: level ?? 'info',
    redact: { paths: REDACT, censor: '[redacted]' },
    // Query strings may carry credentials (?apikey=…): logged URLs are redacted.
    serializers: { req: clientAddresses ? serializeRequest : serializeRequestWithoutClient },
    stream: stream ?? logDestination(),
  };
}

/**
 * A request's access line: one line at info when it is answered ("request completed", with the
 * request's method, redacted URL, host and client, the status and the time taken), where Fastify
 * writes two (the incoming line and the completed one). The incoming line stays, at debug: a
 * request that never answers can still be found. The access line is pino's line, spelt out: the
 * same fields in the same order (level, time, pid, hostname, reqId, req, res, responseTime, msg),
 * made from the fields named here only, the URL already redacted (redactUrl), each value through
 * JSON.stringify. Through the logger it cost about three times as much: the redaction paths walk
 * every object of a line, and pino serialises nested objects with its cycle-safe stringifier. A line
 * of a request that failed (Fastify's "request errored", with its error) goes through the redacting
 * logger as before.
 */
class AccessLog extends LogController {
  readonly #stream: { write(line: string): unknown };
  readonly #serializeRequest: (request: FastifyRequest) => object;
  /** `"pid":…,"hostname":…`, as pino's own lines carry them. */
  readonly #bindings = `"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`;

  constructor(stream: { write(line: string): unknown }, clientAddresses: boolean) {
    super();
    this.#stream = stream;
    this.#serializeRequest = clientAddresses ? serializeRequest : serializeRequestWithoutClient;
  }

  override incomingRequest(request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return;
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) {
      super.requestCompleted(error, request, reply);
      return;
    }
    // Whether a line is written is the request logger's to say (the service's level, or a route's own).
    if (this.isLogDisabled(request) || !isLevelEnabled(request.log, 'info')) return;
    this.#stream.write(
      `{"level":30,"time":${Date.now()},${this.#bindings},"reqId":${JSON.stringify(request.id)},"req":${JSON.stringify(
        this.#serializeRequest(request),
      )},"res":{"statusCode":${reply.statusCode}},"responseTime":${reply.elapsedTime},"msg":"request completed"}\n`,
    );
  }
}

/** The app's request lines (AccessLog), to `stream` (tests capture them) or stdout. */
export function accessLog(stream: Writable | undefined, clientAddresses = true): LogController {
  return new AccessLog(stream ?? logDestination(), clientAddresses);
}
