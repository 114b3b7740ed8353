import type { Writable } from 'node:stream';
import type { FastifyServerOptions } from 'fastify';
import { type DestinationStream, pino } from 'pino';
import type { LogLevel } from '../config.js';
import { serializeRequest, serializeRequestWithoutClient } from './log-redaction.js';

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
