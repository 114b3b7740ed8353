import type { Writable } from 'node:stream';
import { type FastifyReply, type FastifyRequest, type FastifyServerOptions, LogController } from 'fastify';
import { type DestinationStream, type Logger, pino } from 'pino';
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

/**
 * Where a process's log lines go unless a test captures them: standard output, written
 * asynchronously. A synchronous write made every logged request wait for its own write system
 * call (two lines a request at the default level, info); asynchronous, lines that arrive while a
 * write is under way go out together in the next one, and none waits at low traffic. pino writes
 * what is still buffered synchronously when the process exits (also on an uncaught exception); a
 * process killed with SIGKILL can lose the last lines. One destination for the whole process, so
 * the service's own lines and its requests' stay in order. When whatever reads standard output
 * stops reading, at most LOG_BUFFER_LIMIT_BYTES wait in memory and later lines are dropped: a stuck
 * log reader must not grow the service without bound, nor stop it answering.
 */
export function logDestination(): DestinationStream {
  standardOutput ??= pino.destination({ dest: 1, sync: false, maxLength: LOG_BUFFER_LIMIT_BYTES });
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
 * request that never answers can still be found. The access line is written without the logger's
 * redaction paths: it is made only of the fields named here, the URL already redacted
 * (redactUrl), and the redaction's walk over every object of a line was most of its cost (about
 * 10 of 15 µs a line). A line of a request that failed (Fastify's "request errored", with its
 * error) goes through the redacting logger as before.
 */
class AccessLog extends LogController {
  readonly #lines: Logger;
  readonly #serializeRequest: (request: FastifyRequest) => object;

  constructor(stream: Writable | DestinationStream, clientAddresses: boolean) {
    super();
    // Its own level is info; whether a request's line is written is its request logger's to say
    // (the service's level, or a route's own).
    this.#lines = pino({ level: 'info' }, stream);
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
    if (this.isLogDisabled(request) || !isLevelEnabled(request.log, 'info')) return;
    this.#lines.info(
      {
        reqId: request.id,
        req: this.#serializeRequest(request),
        res: { statusCode: reply.statusCode },
        responseTime: reply.elapsedTime,
      },
      'request completed',
    );
  }
}

/** The app's request lines (AccessLog), to `stream` (tests capture them) or stdout. */
export function accessLog(stream: Writable | undefined, clientAddresses = true): LogController {
  return new AccessLog(stream ?? logDestination(), clientAddresses);
}
