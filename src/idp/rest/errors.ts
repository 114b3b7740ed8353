import { classifyError } from '../../kit/http/classify-error.js';

/** An error in PostgREST's terms: its status and its body's four fields. */
export class RestError extends Error {
  /**
   * The planner did not find a name in the schema cache (a table, column, relationship or
   * function), which may have been created since the cache was read: planning is tried once more
   * against a cache read after the miss before this is answered.
   */
  schemaMiss = false;
  /** Seconds for Retry-After (a rate limit's window, an outage's pause). */
  retryAfterSeconds: number | null = null;

  constructor(
    public status: number,
    public code: string,
    message: string,
    /** A string, or PostgREST's structured details (the relationships of PGRST201). */
    public details: string | unknown[] | null = null,
    public hint: string | null = null,
  ) {
    super(message);
    this.name = 'RestError';
  }

  /** PostgREST's error body: all four keys, missing values null. */
  toJSON(): { code: string; details: string | unknown[] | null; hint: string | null; message: string } {
    return { code: this.code, details: this.details, hint: this.hint, message: this.message };
  }
}

function missing(error: RestError): RestError {
  error.schemaMiss = true;
  return error;
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
  unknownTable: (schema: string, name: string, hint: string | null = null) =>
    missing(new RestError(404, 'PGRST205', `Could not find the table '${schema}.${name}' in the schema cache`, null, hint)),
  /** Postgres's own words for a qualified column reference (`column notes.nope does not exist`). */
  unknownColumn: (table: string, column: string) => missing(new RestError(400, '42703', `column ${table}.${column} does not exist`)),
  /** A key of a written body, or of `columns`, that the table does not have. */
  unknownBodyColumn: (table: string, column: string) =>
    missing(new RestError(400, 'PGRST204', `Could not find the '${column}' column of '${table}' in the schema cache`)),
  noRelationship: (parent: string, child: string, embedHint: string | null, schema: string, hint: string | null) =>
    missing(
      new RestError(
        400,
        'PGRST200',
        `Could not find a relationship between '${parent}' and '${child}' in the schema cache`,
        `Searched for a foreign key relationship between '${parent}' and '${child}'${embedHint === null ? '' : ` using the hint '${embedHint}'`} in the schema '${schema}', but no matches were found.`,
        hint,
      ),
    ),
  ambiguousRelationship: (parent: string, child: string, details: unknown[], hint: string) =>
    new RestError(
      300,
      'PGRST201',
      `Could not embed because more than one relationship was found for '${parent}' and '${child}'`,
      details,
      hint,
    ),
  notEmbedded: (resource: string) =>
    new RestError(
      400,
      'PGRST108',
      `'${resource}' is not an embedded resource in this request`,
      null,
      `Verify that '${resource}' is included in the 'select' query parameter.`,
    ),
  relatedOrderNotToOne: (origin: string, target: string) =>
    new RestError(
      400,
      'PGRST118',
      `A related order on '${target}' is not possible`,
      `'${origin}' and '${target}' do not form a many-to-one or one-to-one relationship`,
    ),
  spreadNotToOne: (origin: string, target: string) =>
    new RestError(
      400,
      'PGRST119',
      `A spread operation on '${target}' is not possible`,
      `'${origin}' and '${target}' do not form a many-to-one or one-to-one relationship`,
    ),
  aggregatesNotAllowed: () => new RestError(400, 'PGRST123', 'Use of aggregate functions is not allowed'),
  noFunction: (message: string, details: string, hint: string | null) => missing(new RestError(404, 'PGRST202', message, details, hint)),
  ambiguousFunction: (message: string) =>
    new RestError(
      300,
      'PGRST203',
      message,
      null,
      'Try renaming the parameters or the function itself in the database so function overloading can be resolved',
    ),
  invalidRpcMethod: (method: string) => new RestError(405, 'PGRST101', `Cannot use the ${method} method on RPC`),
  mediaTypes: (types: string[]) => new RestError(406, 'PGRST107', `None of these media types are available: ${types.join(', ')}`),
  invalidSchema: (schema: string, exposed: readonly string[]) =>
    new RestError(406, 'PGRST106', `Invalid schema: ${schema}`, null, `Only the following schemas are exposed: ${exposed.join(', ')}`),
  notSingular: (rows: number) =>
    new RestError(406, 'PGRST116', 'Cannot coerce the result to a single JSON object', `The result contains ${rows} rows`),
  invalidBody: (details: string | null) => new RestError(400, 'PGRST102', 'Empty or invalid json', details),
  jwt: (message: string, details: string | null = null) => new RestError(401, 'PGRST301', message, details),
  jwtClaims: (message: string) => new RestError(401, 'PGRST303', message),
  unknownRole: (role: string) => new RestError(401, '22023', `role "${role}" does not exist`),
  unavailable: () =>
    Object.assign(new RestError(503, 'PGRST001', 'Database client error. Retrying the connection.'), { retryAfterSeconds: 1 }),
  invalidPreferences: (prefs: string[]) =>
    new RestError(400, 'PGRST122', 'Invalid preferences given with handling=strict', `Invalid preferences: ${prefs.join(', ')}`),
  offsetPastEnd: (offset: number, total: number) =>
    new RestError(
      416,
      'PGRST103',
      'Requested range not satisfiable',
      `An offset of ${offset} was requested, but there are only ${total} rows.`,
    ),
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
