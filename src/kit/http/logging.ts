import type { Writable } from 'node:stream';
import type { FastifyServerOptions } from 'fastify';
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
    ...(stream ? { stream } : {}),
  };
}
