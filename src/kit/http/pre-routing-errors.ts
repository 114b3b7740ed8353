import { STATUS_CODES } from 'node:http';
import type { FastifyBaseLogger, FastifyReply, FastifyServerOptions } from 'fastify';
import { rawHttpResponse } from './limits.js';
import type { ErrorBody } from './error-body.js';

/**
 * Fastify's two hooks for errors answered before any route runs, in the
 * service's envelope. `log` is the app's logger, which exists only once the
 * options have made the app.
 */
export function preRoutingErrorOptions(
  errorBody: ErrorBody,
  log: () => FastifyBaseLogger,
  clientAddresses = true,
): Pick<FastifyServerOptions, 'frameworkErrors' | 'clientErrorHandler'> {
  return {
    // Errors Fastify answers before routing (an undecodable %-escape, an
    // over-long path parameter) get the service's envelope like any other.
    frameworkErrors: (err, _request, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400;
      void (reply as FastifyReply).code(status).send(errorBody(status, status === 414 ? 'URI too long' : 'Malformed URL'));
    },
    // Requests the HTTP parser refuses (bad Content-Length, broken request
    // line, oversized headers): an enveloped answer, and the connection is
    // closed, as the client must be told since the socket is destroyed after.
    // A request past its header or request deadline arrives here too (408).
    clientErrorHandler: (err, socket) => {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ECONNRESET' || socket.destroyed) return;
      const status = code === 'HPE_HEADER_OVERFLOW' ? 431 : code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
      if (status === 408) {
        const client = clientAddresses ? { remoteAddress: socket.remoteAddress } : {};
        log().info(client, 'request not complete by its deadline: 408, connection closed');
      }
      // Once a response has begun on this socket, another one would corrupt it.
      const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
      if (socket.writable && !answering) {
        socket.write(rawHttpResponse(status, errorBody(status, STATUS_CODES[status] ?? 'Bad Request')));
      }
      socket.destroy();
    },
  };
}
