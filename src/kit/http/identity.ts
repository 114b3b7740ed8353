import type { FastifyRequest } from 'fastify';

// How a service attaches a verified caller to a request: one typed slot per
// kind of identity, filled by the authentication hook of a scope and read by
// the routes inside it. Nothing is declared on FastifyRequest, so one
// service's identity type never appears on another service's requests.

export interface RequestSlot<T> {
  /** Called by the authentication hook once the caller is verified. */
  set(request: FastifyRequest, value: T): void;
  /** The value set for this request; throws on a route outside the authenticated scope (a bug, never the client's doing). */
  get(request: FastifyRequest): T;
}

/** A slot named for its error message, e.g. `requestSlot<AccessClaims>('accounts caller')`. */
export function requestSlot<T>(name: string): RequestSlot<T> {
  const values = new WeakMap<FastifyRequest, T>();
  return {
    set: (request, value) => {
      values.set(request, value);
    },
    get: (request) => {
      if (!values.has(request)) throw new Error(`${name} read on a route outside its authenticated scope`);
      return values.get(request) as T;
    },
  };
}
