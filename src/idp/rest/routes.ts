import { Type } from '@sinclair/typebox';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../../kit/clock.js';
import type { Pool } from '../../kit/db.js';
import type { App } from '../../kit/http/app.js';
import { unexpectedErrorOutcome } from '../../kit/http/classify-error.js';
import { InvalidJsonBody } from '../../kit/http/json-body.js';
import { DOCUMENT_ONLY, described } from '../../kit/http/openapi.js';
import type { CounterStore } from '../../kit/rate-limit.js';
import { type GatewayKeys, gatewayHook, KEY_SECURITY, USER_SECURITY } from '../gateway.js';
import { acceptJsonBodies } from '../../kit/http/json-body-parser.js';
import type { SigningKeys } from '../keys.js';
import { RestError, restErrors } from './errors.js';
import { handleRest, type RestContext, sendRestError, type Target, type TxEnd } from './handler.js';
import { SchemaCache } from './schema-cache.js';
import { StatementCache } from './statement-cache.js';
import { WriteLimits } from './write-limits.js';

// The PostgREST subset, mounted at /rest/v1 behind the gateway:
//   GET|HEAD /:table      select (columns, embedded resources, casts, JSON paths), filters, order,
//                         limit/offset, Prefer: count=exact|planned|estimated
//   POST     /:table      insert an object or an array of objects (upsert with Prefer: resolution=…)
//   PATCH    /:table      update the rows matching the filters
//   DELETE   /:table      delete the rows matching the filters
//   GET|HEAD|POST /rpc/:fn  call a function (GET: arguments in the query, read-only)
// Prefer: return=representation|minimal; Accept: application/json, application/vnd.pgrst.object+json,
// text/csv, nulls=stripped; Accept-Profile / Content-Profile for the exposed schemas.

const PostgrestErrorSchema = Type.Object(
  {
    code: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    details: Type.Optional(Type.Union([Type.String(), Type.Array(Type.Unknown()), Type.Null()])),
    hint: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    message: Type.String(),
  },
  { description: 'PostgREST error (the gateway 401 has only message and hint)' },
);
const Rows = Type.Unknown({ description: 'JSON array of rows, one object with the object Accept type, or CSV text' });

export interface RestOptions {
  gateway: GatewayKeys;
  /** The authenticator pool every request runs on. */
  pool: Pool;
  /** A pool that reads the catalog for the schema cache. */
  catalogPool: Pool;
  keys: SigningKeys;
  clock: Clock;
  /** Counts writes per caller (shared by every instance with Redis). */
  writeCounter: CounterStore;
  settings: {
    schemas: readonly string[];
    txEnd: TxEnd;
    maxBodyBytes: number;
    maxRows: number;
    writesPerMinute: number;
    ipv6Prefix: number;
    ipv6WidePrefix: number;
  };
}

export async function restRoutes(scope: App, opts: RestOptions): Promise<void> {
  const { settings } = opts;
  const schema = new SchemaCache(opts.catalogPool, {
    schemas: settings.schemas,
    warn: (message) => scope.log.warn(message),
    // A reload an operator asked for (NOTIFY) or one after the listener reconnected is worth a line;
    // the start's and the misses' are not.
    loaded: (reason) => scope.log[reason === 'notify' || reason === 'reconnect' ? 'info' : 'debug']({ reason }, 'schema cache loaded'),
  });
  await schema.start();
  scope.addHook('onClose', async () => schema.close());
  const ctx: RestContext = {
    pool: opts.pool,
    schema,
    keys: opts.keys,
    settings: { schemas: settings.schemas, txEnd: settings.txEnd },
    limits: new WriteLimits(opts.writeCounter, opts.clock, settings),
    statements: new StatementCache(),
  };
  scope.addHook('onRequest', gatewayHook(opts.gateway));
  acceptJsonBodies(scope, 'none');

  // Errors raised before the handler runs: body parsing, size, media type.
  scope.setErrorHandler((err: FastifyError | Error, request, reply) => {
    if (err instanceof InvalidJsonBody) return sendRestError(reply, restErrors.invalidBody(err.message));
    const outcome = unexpectedErrorOutcome(err, request.log);
    switch (outcome.kind) {
      case 'client-gone':
        return sendRestError(reply, new RestError(outcome.status, 'PGRST102', 'Request not complete'));
      case 'client-error':
        return sendRestError(reply, new RestError(outcome.status, 'PGRST102', outcome.message));
      case 'unavailable':
        return sendRestError(reply, restErrors.unavailable());
      case 'internal':
        return sendRestError(reply, restErrors.internal());
    }
  });

  const table = (request: FastifyRequest<{ Params: { table: string } }>, reply: FastifyReply) =>
    handleRest(ctx, request, reply, { kind: 'table', name: request.params.table } satisfies Target);
  const call = (request: FastifyRequest<{ Params: { fn: string } }>, reply: FastifyReply) =>
    handleRest(ctx, request, reply, { kind: 'call', name: request.params.fn } satisfies Target);
  const bodyLimit = settings.maxBodyBytes;

  const error = (description: string, example: Record<string, unknown>) => described(PostgrestErrorSchema, description, example);
  const offsetPastEnd = error('Prefer: count=… and an offset past the rows counted', {
    code: 'PGRST103',
    details: 'An offset of 50 was requested, but there are only 6 rows.',
    hint: null,
    message: 'Requested range not satisfiable',
  });
  const errors = {
    300: error('More than one relationship (PGRST201) or function overload (PGRST203) fits; details lists them', {
      code: 'PGRST201',
      details: [
        {
          cardinality: 'many-to-one',
          embedding: 'notes with users',
          relationship: 'notes_author_fkey using notes(author) and users(id)',
        },
      ],
      hint: "Try changing 'users' to one of the following: 'users!notes_author_fkey', 'users!notes_editor_fkey'. Find the desired relationship in the 'details' key.",
      message: "Could not embed because more than one relationship was found for 'notes' and 'users'",
    }),
    400: error(
      'A malformed query, filter or body, an unknown column (42703, PGRST204), no relationship for an embedded resource (PGRST200), a preference refused with handling=strict (PGRST122), or more rows than max-affected (PGRST124)',
      {
        code: 'PGRST100',
        details: 'unexpected "x" expecting operator (eq, gt, ...)',
        hint: null,
        message: '"failed to parse filter (x)" (line 1, column 1)',
      },
    ),
    401: error('The apikey is missing or wrong (gateway: message and hint only), or the bearer token is not valid', {
      code: 'PGRST301',
      details: null,
      hint: null,
      message: 'JWSError JWSInvalidSignature',
    }),
    403: error('Row-level security or a grant refuses the request', {
      code: '42501',
      details: null,
      hint: null,
      message: 'new row violates row-level security policy for table "notes"',
    }),
    404: error('No such table or view (PGRST205) or function (PGRST202) in the schema', {
      code: 'PGRST205',
      details: null,
      hint: null,
      message: "Could not find the table 'public.nope' in the schema cache",
    }),
    405: error('A read-only request that writes (25006: GET of a function that modifies data), or a method functions do not take', {
      code: '25006',
      details: null,
      hint: null,
      message: 'cannot execute INSERT in a read-only transaction',
    }),
    406: error(
      'One object was asked for (Accept: application/vnd.pgrst.object+json) and not exactly one row came (PGRST116), a media type that cannot be produced (PGRST107), or a schema that is not exposed (PGRST106)',
      {
        code: 'PGRST116',
        details: 'The result contains 0 rows',
        hint: null,
        message: 'Cannot coerce the result to a single JSON object',
      },
    ),
    409: error('A unique, foreign-key or other constraint refuses the change', {
      code: '23505',
      details: 'Key (id)=(1) already exists.',
      hint: null,
      message: 'duplicate key value violates unique constraint "notes_pkey"',
    }),
    413: error('Request body larger than the limit, or an insert of more rows than one request may carry', {
      code: 'PGRST102',
      details: 'At most 10000 rows may be written by one request; this one has 20000.',
      hint: 'Send the rows in several requests.',
      message: 'Too many rows in the request body',
    }),
    415: error('The body must be application/json', { code: 'PGRST102', details: null, hint: null, message: 'Unsupported Media Type' }),
    429: error('The caller wrote more than its limit this minute (Retry-After)', {
      code: 'over_request_rate_limit',
      details: 'At most 50000 rows may be written per minute (an insert counts its rows, any other write one); try again in 42 seconds.',
      hint: null,
      message: 'Too many writes',
    }),
    500: error('Unexpected failure (its cause is only logged)', {
      code: 'XX000',
      details: null,
      hint: null,
      message: 'Internal Server Error',
    }),
    503: error('The database is unavailable (Retry-After)', {
      code: 'PGRST001',
      details: null,
      hint: null,
      message: 'Database client error. Retrying the connection.',
    }),
  };
  const tableParam = Type.Object({ table: Type.String({ description: 'a table or view of the schema (see Accept-Profile)' }) });
  const fnParam = Type.Object({ fn: Type.String({ description: 'a function of the schema (see Accept-Profile / Content-Profile)' }) });
  // The query string and the body are read by the handler itself (filters repeat keys and keep their
  // order), so Fastify validates neither: the document alone describes them.
  const anyQuery = Type.Object(
    {},
    { additionalProperties: true, description: 'select, order, limit, offset, columns and <column>=<op>.<value> filters' },
  );
  const text = (description: string, example?: string) =>
    Type.Optional(Type.String({ description, ...(example && { examples: [example] }) }));
  const documentedQuery = (extra: Record<string, ReturnType<typeof text>>) =>
    Type.Object({
      select: text(
        'Columns to return, comma-separated: alias:column, column::type, json_column->key->>key, and embedded resources ' +
          'name(columns), alias:name!hint!inner(…), ...name(columns) to spread a to-one resource (reads; writes with Prefer: return=representation)',
        'id,title,author:users(name),tags(name)',
      ),
      ...extra,
    });
  const filtered = {
    order: text(
      'Sort: <column>[.asc|.desc][.nullsfirst|.nullslast], comma-separated; <embed>(<column>) for a to-one resource',
      'created_at.desc',
    ),
    limit: text('At most this many rows (a non-negative integer); <embed>.limit for an embedded resource', '10'),
    offset: text('Skip this many rows first (a non-negative integer); <embed>.offset for an embedded resource', '0'),
    or: text(
      'Rows matching any of the filters: (<column>.<op>.<value>,…), nested and(…)/or(…), not. to negate; also and=, not.or=, not.and=, <embed>.or=',
      '(title.ilike.*milk*,body.ilike.*milk*)',
    ),
    and: text('Rows matching all of the filters, written like or', '(id.gte.1,id.lte.9)'),
  };
  const FILTERS =
    'Filters: any other query parameter `<column>=<op>.<value>` keeps the rows where the column matches ' +
    '(eq, neq, gt, gte, lt, lte, like, ilike, match, imatch, in.(a,b), is, isdistinct, cs, cd, ov, sl, sr, nxr, nxl, adj, ' +
    'fts, plfts, phfts, wfts with an optional (language), eq/like/ilike/… with (any) or (all) and an {a,b} list, and not.<op>), ' +
    'e.g. `?id=eq.42&title=ilike.*draft*` (in like and ilike `*` stands for `%`); `<embed>.<column>=…` filters an embedded ' +
    'resource and `<embed>=not.is.null` keeps the rows that have one; `or=(…)` and `and=(…)` combine filters; several filters all apply. ' +
    'PATCH and DELETE act on the rows the filters keep.';
  const ACCEPT =
    'application/json (an array, the default), application/vnd.pgrst.object+json (exactly one row as an object, else 406), ' +
    'text/csv, and ;nulls=stripped on application/vnd.pgrst.array+json or the object type (keys whose value is null left out)';
  const headers = (prefer: string, profile: 'accept-profile' | 'content-profile') =>
    Type.Object({
      prefer: text(prefer),
      accept: text(ACCEPT),
      [profile]: text('Another exposed schema (IDP_REST_SCHEMAS); the answer names it in Content-Profile', 'api'),
    });
  const RowsBody = Type.Union(
    [Type.Object({}, { additionalProperties: true }), Type.Array(Type.Object({}, { additionalProperties: true }))],
    {
      description: 'One row as an object, or several as an array of objects (columns as keys)',
    },
  );
  const rows = (description: string) => described(Rows, description, [{ id: 1, title: 'A note', body: null }]);
  const noBody = (description: string) => described(Type.Null(), description);
  const security = [...KEY_SECURITY, ...USER_SECURITY];
  const common = { tags: ['rest'], security, params: tableParam, querystring: anyQuery };
  const READ_PREFER =
    "count=exact (count every matching row), count=planned (the planner's estimate) or count=estimated (exact up to 1,000 rows, " +
    'the estimate beyond): the total of Content-Range, and 206 when not all are returned; handling=strict: an unknown or ' +
    'unsupported preference is 400 PGRST122';

  scope.get(
    '/:table',
    {
      schema: {
        ...common,
        summary: 'Read rows',
        description: `${FILTERS} HEAD answers the same headers without a body. Content-Range gives the rows returned (and the total with Prefer: count=…); Preference-Applied echoes the count and handling preferences applied.`,
        [DOCUMENT_ONLY]: { querystring: documentedQuery(filtered), headers: headers(READ_PREFER, 'accept-profile') },
        response: {
          200: rows('The rows (an array, one object with the object Accept type, or CSV)'),
          206: rows('Some of the rows: Prefer: count=… and more rows match than were returned'),
          416: offsetPastEnd,
          ...errors,
        },
      },
    },
    table,
  );
  const WRITE_PREFER =
    'return=representation (answer with the rows written) or return=minimal (the default: no body); count=exact; ' +
    'handling=strict (an unknown or unsupported preference is 400 PGRST122) or handling=lenient (the default: ignored); ' +
    'tx=commit or tx=rollback where IDP_REST_TX_END allows clients to choose';
  const APPLIED = 'Preference-Applied echoes the Prefer options applied.';
  const UPSERT_PREFER =
    `${WRITE_PREFER}; resolution=merge-duplicates or resolution=ignore-duplicates (upsert on on_conflict, else the primary key); ` +
    'missing=default: a column a row leaves out takes its default, not null';
  const LIMIT_PREFER = `${WRITE_PREFER}; max-affected=N with handling=strict (more rows would change: 400 PGRST124, nothing changed)`;
  scope.post(
    '/:table',
    {
      bodyLimit,
      schema: {
        ...common,
        summary: 'Insert rows',
        description: `${APPLIED} An upsert that only merged existing rows answers 200, anything that created a row 201.`,
        [DOCUMENT_ONLY]: {
          querystring: documentedQuery({
            columns: text('Only these columns of the body are inserted, comma-separated', 'title,body'),
            on_conflict: text('With Prefer: resolution=…, the unique columns a conflict is detected on (default: the primary key)', 'id'),
          }),
          headers: headers(UPSERT_PREFER, 'content-profile'),
          body: RowsBody,
        },
        response: {
          200: described(Rows, 'Upserted with merge-duplicates and every row already existed: the rows with return=representation', [
            { id: 1, title: 'A note', body: null },
          ]),
          201: described(Rows, 'Inserted: the rows with return=representation, otherwise no body', [
            { id: 1, title: 'A note', body: null },
          ]),
          ...errors,
        },
      },
    },
    table,
  );
  scope.patch(
    '/:table',
    {
      bodyLimit,
      schema: {
        ...common,
        summary: 'Update the filtered rows',
        description: `${FILTERS} ${APPLIED}`,
        [DOCUMENT_ONLY]: {
          querystring: documentedQuery(filtered),
          headers: headers(LIMIT_PREFER, 'content-profile'),
          body: Type.Object({}, { additionalProperties: true, description: 'The columns to set and their new values' }),
        },
        response: { 200: rows('Updated: the rows, with return=representation'), 204: noBody('Updated (return=minimal)'), ...errors },
      },
    },
    table,
  );
  scope.delete(
    '/:table',
    {
      schema: {
        ...common,
        summary: 'Delete the filtered rows',
        description: `${FILTERS} ${APPLIED}`,
        [DOCUMENT_ONLY]: { querystring: documentedQuery(filtered), headers: headers(LIMIT_PREFER, 'content-profile') },
        response: { 200: rows('Deleted: the rows, with return=representation'), 204: noBody('Deleted (return=minimal)'), ...errors },
      },
    },
    table,
  );

  const CALL =
    'Calls the function as the caller (its grants and row-level security apply). A function returning rows takes select, ' +
    'filters, order and limit/offset on them, and embeds the relationships of the table it returns. A scalar answers the ' +
    'value, a set of scalars an array, a single row an object, a set of rows an array; a void function 204.';
  const callResponses = {
    200: rows('The result'),
    204: noBody('The function returns void'),
    206: rows('Some of the rows: Prefer: count=… and more rows match than were returned'),
    416: offsetPastEnd,
    ...errors,
  };
  const callCommon = { tags: ['rest'], security, params: fnParam, querystring: anyQuery };
  scope.get(
    '/rpc/:fn',
    {
      schema: {
        ...callCommon,
        summary: 'Call a function that reads',
        description: `${CALL} Its arguments are the query parameters without an operator (a repeated one fills a variadic parameter); it runs read-only, so a function that writes fails with 405 25006.`,
        [DOCUMENT_ONLY]: { querystring: documentedQuery(filtered), headers: headers(READ_PREFER, 'accept-profile') },
        response: callResponses,
      },
    },
    call,
  );
  scope.post(
    '/rpc/:fn',
    {
      bodyLimit,
      schema: {
        ...callCommon,
        summary: 'Call a function',
        description: `${CALL} Its arguments are the keys of the JSON body; a function of one unnamed json or jsonb parameter takes the whole body, and so does one json/jsonb parameter with Prefer: params=single-object. A stable or immutable function runs read-only.`,
        [DOCUMENT_ONLY]: {
          querystring: documentedQuery(filtered),
          headers: headers(`${READ_PREFER}; params=single-object; max-affected=N with handling=strict; tx=…`, 'content-profile'),
          body: Type.Unknown({ description: 'The arguments as a JSON object (or the one json/jsonb argument)' }),
        },
        response: callResponses,
      },
    },
    call,
  );
  // PostgREST's answer to the other methods on a function.
  scope.route({
    method: ['PATCH', 'PUT', 'DELETE'],
    url: '/rpc/:fn',
    schema: { hide: true },
    handler: (request, reply) => sendRestError(reply, restErrors.invalidRpcMethod(request.method)),
  });
}
