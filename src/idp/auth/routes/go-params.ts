import type { FastifyRequest } from 'fastify';

/**
 * GoTrue's name for a route's body (its Go struct), which its decoding errors mention: each route
 * declares it as `config: { goParams }`, a name or, where the body depends on the query, a choice.
 */
export type GoParams = string | ((request: FastifyRequest) => string);

declare module 'fastify' {
  interface FastifyContextConfig {
    goParams?: GoParams;
  }
}

/** The route's Go struct name; GoTrue's generic `Params` for a route that declares none. */
export function goParamsOf(request: FastifyRequest): string {
  const declared = request.routeOptions.config?.goParams;
  if (declared === undefined) return 'Params';
  return typeof declared === 'string' ? declared : declared(request);
}
