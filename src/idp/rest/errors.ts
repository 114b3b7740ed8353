import { classifyError } from '../../kit/classify-error.js';

/** An error in PostgREST's terms: its status and its body's four fields. */
export class RestError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
    public details: string | null = null,
    public hint: string | null = null,
  ) {
    super(message);
    this.name = 'RestError';
  }

  /** PostgREST's error body: all four keys, missing values null. */
  toJSON(): { code: string; details: string | null; hint: string | null; message: string } {
    return { code: this.code, details: this.details, hint: this.hint, message: this.message };
  }
}

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
  unknownTable: (name: string, hint: string | null = null) =>
    new RestError(404, 'PGRST205', `Could not find the table 'public.${name}' in the schema cache`, null, hint),
  invalidSchema: (schema: string) =>
    new RestError(406, 'PGRST106', `Invalid schema: ${schema}`, null, 'Only the following schemas are exposed: public'),
  notSingular: (rows: number) =>
    new RestError(406, 'PGRST116', 'Cannot coerce the result to a single JSON object', `The result contains ${rows} rows`),
  invalidBody: (details: string | null) => new RestError(400, 'PGRST102', 'Empty or invalid json', details),
  jwt: (message: string, details: string | null = null) => new RestError(401, 'PGRST301', message, details),
  jwtClaims: (message: string) => new RestError(401, 'PGRST303', message),
  unknownRole: (role: string) => new RestError(401, '22023', `role "${role}" does not exist`),
  unavailable: () => new RestError(503, 'PGRST001', 'Database client error. Retrying the connection.'),
  invalidPreferences: (prefs: string[]) =>
    new RestError(400, 'PGRST122', 'Invalid preferences given with handling=strict', `Invalid preferences: ${prefs.join(', ')}`),
  offsetPastEnd: (offset: number, total: number) =>
    new RestError(416, 'PGRST103', 'Requested range not satisfiable', `An offset of ${offset} was requested, but there are only ${total} rows.`),
  maxAffected: (rows: number) =>
    new RestError(400, 'PGRST124', 'Query result exceeds max-affected preference constraint', `The query affects ${rows} rows`),
  internal: () => new RestError(500, 'XX000', 'Internal Server Error'),
};

/** The client-facing error for a failure of a REST request's transaction; never leaks a 5xx's cause. */
export function toRestError(err: unknown, role: string): { error: RestError; expected: boolean } {
  if (err instanceof RestError) return { error: err, expected: true };
  // The kit decides what is an outage (database, pool, file descriptors), as for every service.
  if (classifyError(err).kind === 'unavailable') return { error: restErrors.unavailable(), expected: false };
  const e = err as DbError | null;
  const code = typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : null;
  if (code === null || serverSide(code)) return { error: restErrors.internal(), expected: false };
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
  return {
    error: new RestError(statusFor(code, role), code, text(e?.message) ?? code, text(e?.detail), text(e?.hint)),
    expected: true,
  };
}
