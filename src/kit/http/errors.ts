// Errors a handler throws on purpose. The central error handler turns them into
// the service's envelope with their status and message; anything else is a 500
// whose message never reaches the client.

export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

export const badRequest = (message: string) => new HttpError(400, message);
export const unauthorized = (message: string) => new HttpError(401, message);
export const forbidden = (message: string) => new HttpError(403, message);
export const notFound = (message: string) => new HttpError(404, message);
export const serviceUnavailable = (message = 'Service temporarily unavailable, try again shortly') =>
  new HttpError(503, message, { 'retry-after': '1' });
