import { classifyError } from '../../kit/classify-error.js';
import { RestQueryError } from './query.js';

// PostgREST's mapping from SQLSTATE to HTTP status (Error.hs), for errors the client caused.
// Classes that mean a server-side problem become a 500 / 503 whose body says nothing about it.

type DbError = { code?: unknown; message?: unknown; detail?: unknown; hint?: unknown };

function serverSide(code: string): boolean {
  return /^(08|09|25|2D|38|39|3B|40|53|55|57|58|F0|HV|P0|XX)/.test(code) && code !== 'P0001' && code !== '25006';
}

function statusFor(code: string, role: string): number {
  if (code === '42501') return role === 'anon' ? 401 : 403;
  if (code === '23503' || code === '23505') return 409;
  if (code === '25006') return 405;
  if (code === '42883' || code === '42P01') return 404;
  if (/^(0L|0P|28)/.test(code)) return 403;
  if (code.startsWith('54')) return 413;
  return 400;
}

export const restErrors = {
  unknownTable: (name: string) =>
    new RestQueryError(404, 'PGRST205', `Could not find the table 'public.${name}' in the schema cache`),
  invalidSchema: (schema: string) =>
    new RestQueryError(406, 'PGRST106', `Invalid schema: ${schema}`, null, 'Only the following schemas are exposed: public'),
  notSingular: (rows: number) =>
    new RestQueryError(406, 'PGRST116', 'Cannot coerce the result to a single JSON object', `The result contains ${rows} rows`),
  invalidBody: (details: string | null) => new RestQueryError(400, 'PGRST102', 'Empty or invalid json', details),
  jwt: (message: string) => new RestQueryError(401, 'PGRST301', message),
  jwtClaims: (message: string) => new RestQueryError(401, 'PGRST303', message),
  unknownRole: (role: string) => new RestQueryError(401, '22023', `role "${role}" does not exist`),
  unavailable: () => new RestQueryError(503, 'PGRST001', 'Database client error. Retrying the connection.'),
  internal: () => new RestQueryError(500, 'XX000', 'Internal Server Error'),
};

/** The client-facing error for a failure of a REST request's transaction; never leaks a 5xx's cause. */
export function toRestError(err: unknown, role: string): { error: RestQueryError; expected: boolean } {
  if (err instanceof RestQueryError) return { error: err, expected: true };
  // The kit decides what is an outage (database, pool, file descriptors), as for every service.
  if (classifyError(err).kind === 'unavailable') return { error: restErrors.unavailable(), expected: false };
  const e = err as DbError | null;
  const code = typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : null;
  if (code === null || serverSide(code)) return { error: restErrors.internal(), expected: false };
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
  return {
    error: new RestQueryError(statusFor(code, role), code, text(e?.message) ?? code, text(e?.detail), text(e?.hint)),
    expected: true,
  };
}
