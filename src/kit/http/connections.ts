import type { FastifyInstance } from 'fastify';
import { noteDescriptorExhaustion, isDescriptorExhaustion } from '../classify-error.js';
import { capConnections, type ConnectionCap, rawHttpResponse } from '../http-limits.js';
import type { ErrorBody } from './error-body.js';

/**
 * At most `max` open connections (more are refused with a 503), and a failed
 * accept (out of file descriptors) is logged and remembered for /readyz
 * instead of ending the process.
 */
export function limitConnections(app: FastifyInstance, max: number, errorBody: ErrorBody): ConnectionCap {
  const connections = capConnections(app.server, max, () =>
    rawHttpResponse(503, errorBody(503, 'Too many connections, try again shortly'), { 'Retry-After': '1' }),
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
