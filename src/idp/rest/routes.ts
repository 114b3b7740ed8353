import { Type } from '@sinclair/typebox';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Pool } from '../../kit/db.js';
import type { App } from '../../kit/http.js';
import { callers, type GatewayKeys, gatewayHook } from '../gateway.js';
import { DOCUMENT_ONLY, described } from '../../kit/openapi.js';
import { KEY_SECURITY, USER_SECURITY } from '../auth/schemas.js';
import { InvalidJsonBody } from '../../kit/json-body.js';
import { acceptOptionalJsonBodies } from '../json-body.js';
import type { SigningKeys } from '../keys.js';
import { unexpectedErrorOutcome } from '../../kit/classify-error.js';
import { RestError, restErrors, toRestError } from './errors.js';
import { type SqlQuery, type TableInfo, buildDelete, buildInsert, buildSelect, buildUpdate, parseSelect } from './query.js';
import { OBJECT_MEDIA_TYPE, type Preferences, parsePrefer, requestIdentity, wantsSingleObject } from './request.js';
import { EXPOSED_SCHEMA, type SchemaCache } from './schema-cache.js';
import { tableNotFoundHint } from './table-hint.js';
import { type TransactionSettings, inRequestTransaction } from './transaction.js';

// The PostgREST subset, mounted at /rest/v1 behind the gateway:
//   GET|HEAD /:table   select, filters, order, limit/offset, Prefer: count=exact
//   POST     /:table   insert an object or an array of objects (upsert with Prefer: resolution=…)
//   PATCH    /:table   update the rows matching the filters
//   DELETE   /:table   delete the rows matching the filters
// Prefer: return=representation|minimal; Accept: application/vnd.pgrst.object+json for one object.

const JSON_TYPE = 'application/json; charset=utf-8';
const OBJECT_TYPE = `${OBJECT_MEDIA_TYPE}; charset=utf-8`;

const PostgrestErrorSchema = Type.Object(
  {
    code: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    details: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    hint: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    message: Type.String(),
  },
  { description: 'PostgREST error (the gateway 401 has only message and hint)' },
);
const Rows = Type.Unknown({ description: 'JSON array of rows, or one object with the object Accept type' });

interface ResultRow {
  body: string;
  n: number;
  total?: number;
}

type Method = 'GET' | 'HEAD' | 'POST' | 'PATCH' | 'DELETE';

function sendRestError(reply: FastifyReply, error: RestError): FastifyReply {
  reply.code(error.status).header('content-type', JSON_TYPE).header('proxy-status', `PostgREST; error=${error.code}`);
  if (error.status === 503) reply.header('retry-after', '1');
  if (error.code === 'PGRST301' || error.code === 'PGRST303') {
    reply.header('www-authenticate', `Bearer error="invalid_token", error_description="${error.message}"`);
  }
  return reply.send(error.toJSON());
}

/** The raw query string: filters may repeat a key and their order matters, so no object parsing. */
function queryParams(url: string): URLSearchParams {
  const at = url.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : url.slice(at + 1));
}

/** Accept-Profile (reads) / Content-Profile (writes) may only name the exposed schema. */
function checkProfile(request: FastifyRequest, method: Method): void {
  const header = method === 'GET' || method === 'HEAD' ? request.headers['accept-profile'] : request.headers['content-profile'];
  if (header !== undefined && header !== EXPOSED_SCHEMA) throw restErrors.invalidSchema(String(header));
}

function buildQuery(method: Method, table: TableInfo, params: URLSearchParams, body: unknown, prefer: Preferences): SqlQuery {
  const returning = () => (prefer.representation ? parseSelect(params.get('select'), table) : null);
  switch (method) {
    case 'GET':
    case 'HEAD':
      return buildSelect(table, params, { count: prefer.countExact });
    case 'POST':
      if (body === undefined) throw restErrors.invalidBody(null);
      return buildInsert(
        table,
        body as Record<string, unknown>,
        returning(),
        params.get('columns'),
        prefer.resolution === null ? null : { resolution: prefer.resolution, onConflict: params.get('on_conflict') },
      );
    case 'PATCH':
      if (body === undefined) throw restErrors.invalidBody(null);
      return buildUpdate(table, body as Record<string, unknown>, params, returning());
    case 'DELETE':
      return buildDelete(table, params, returning());
  }
}

export async function restRoutes(scope: App, opts: { gateway: GatewayKeys; pool: Pool; schema: SchemaCache; keys: SigningKeys }): Promise<void> {
  const { pool, schema, keys } = opts;
  scope.addHook('onRequest', gatewayHook(opts.gateway));
  acceptOptionalJsonBodies(scope, undefined);

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

  /** Builds against the cached columns; on an unknown column, re-reads the table once (it may have changed). */
  async function build(name: string, make: (table: TableInfo) => SqlQuery): Promise<SqlQuery> {
    const table = await schema.table(name);
    if (!table) throw restErrors.unknownTable(name, tableNotFoundHint(EXPOSED_SCHEMA, name, await schema.tableNames()));
    try {
      return make(table);
    } catch (err) {
      if (!(err instanceof RestError) || (err.code !== '42703' && err.code !== 'PGRST204')) throw err;
      const fresh = await schema.reload(name);
      if (!fresh) throw restErrors.unknownTable(name);
      return make(fresh);
    }
  }

  async function handle(request: FastifyRequest<{ Params: { table: string } }>, reply: FastifyReply) {
    const method = request.method as Method;
    let role: TransactionSettings['role'] = 'anon';
    try {
      const identity = await requestIdentity(callers.get(request), keys);
      role = identity.role;
      checkProfile(request, method);
      const params = queryParams(request.url);
      const prefer = parsePrefer(request.headers.prefer);
      if (prefer.strict && prefer.invalid.length > 0) throw restErrors.invalidPreferences(prefer.invalid);
      const single = wantsSingleObject(request.headers.accept);
      const name = request.params.table;
      const query = await build(name, (table) => buildQuery(method, table, params, request.body, prefer));
      const readOnly = method === 'GET' || method === 'HEAD';

      const result = await inRequestTransaction<ResultRow | RestError>(
        pool,
        { role, claims: identity.claims, method, path: `/${name}`, readOnly },
        async (client) => {
          const { rows } = await client.query<ResultRow>(query.text, query.values);
          const row = rows[0] ?? { body: '[]', n: 0 };
          // PostgREST undoes the whole request when one object was asked for and not exactly one row came.
          if (single && row.n !== 1) return { value: restErrors.notSingular(row.n), commit: false };
          // max-affected binds only with handling=strict; exceeding it undoes the change.
          if ((method === 'PATCH' || method === 'DELETE') && prefer.strict && prefer.maxAffected !== null && row.n > prefer.maxAffected) {
            return { value: restErrors.maxAffected(row.n), commit: false };
          }
          return { value: row, commit: true };
        },
      );
      if (result instanceof RestError) return sendRestError(reply, result);

      // On reads PostgREST reports only the preferences a read can apply (count, handling).
      const applied = readOnly ? prefer.applied.filter((p) => p.startsWith('count=') || p.startsWith('handling=')) : prefer.applied;
      if (applied.length > 0) reply.header('preference-applied', applied.join(', '));
      const body = single ? result.body.slice(1, -1) : result.body;
      const contentType = single ? OBJECT_TYPE : JSON_TYPE;

      if (readOnly) {
        const offset = Number(params.get('offset') ?? 0) || 0;
        const total = prefer.countExact ? String(result.total ?? 0) : '*';
        const range = result.n > 0 ? `${offset}-${offset + result.n - 1}/${total}` : `*/${total}`;
        // PostgREST's rangeStatus: an offset past the counted rows is 416, not an empty page.
        if (prefer.countExact && result.total !== undefined && offset > result.total) {
          return sendRestError(reply.header('content-range', range), restErrors.offsetPastEnd(offset, result.total));
        }
        const partial = prefer.countExact && result.total !== undefined && result.n < result.total;
        return reply.code(partial ? 206 : 200).header('content-range', range).header('content-type', contentType).send(body);
      }
      reply.header('content-range', `*/${prefer.countExact ? result.n : '*'}`);
      const status = method === 'POST' ? 201 : prefer.representation ? 200 : 204;
      if (!prefer.representation) return reply.code(status).send();
      return reply.code(status).header('content-type', contentType).send(body);
    } catch (err) {
      const { error, expected } = toRestError(err, role);
      if (!expected) request.log.error({ err }, 'REST request failed');
      return sendRestError(reply, error);
    }
  }

  const error = (description: string, example: Record<string, unknown>) => described(PostgrestErrorSchema, description, example);
  const offsetPastEnd = error('Prefer: count=exact and an offset past the rows counted', {
    code: 'PGRST103',
    details: 'An offset of 50 was requested, but there are only 6 rows.',
    hint: null,
    message: 'Requested range not satisfiable',
  });
  const errors = {
    400: error('A malformed query, filter or body, an unknown column, a preference refused with handling=strict (PGRST122), or more rows than max-affected (PGRST124)', {
      code: 'PGRST100',
      details: 'unexpected "x" expecting operator (eq, gt, ...)',
      hint: null,
      message: '"failed to parse filter (x)" (line 1, column 1)',
    }),
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
    404: error('No such table or view in the public schema', {
      code: 'PGRST205',
      details: null,
      hint: null,
      message: "Could not find the table 'public.nope' in the schema cache",
    }),
    406: error('One object was asked for (Accept: application/vnd.pgrst.object+json) and not exactly one row came, or another schema was asked for', {
      code: 'PGRST116',
      details: 'The result contains 0 rows',
      hint: null,
      message: 'Cannot coerce the result to a single JSON object',
    }),
    409: error('A unique, foreign-key or other constraint refuses the change', {
      code: '23505',
      details: 'Key (id)=(1) already exists.',
      hint: null,
      message: 'duplicate key value violates unique constraint "notes_pkey"',
    }),
    413: error('Request body larger than the limit', { code: 'PGRST102', details: null, hint: null, message: 'Request body is too large' }),
    415: error('The body must be application/json', { code: 'PGRST102', details: null, hint: null, message: 'Unsupported Media Type' }),
    500: error('Unexpected failure (its cause is only logged)', { code: 'XX000', details: null, hint: null, message: 'Internal Server Error' }),
    503: error('The database is unavailable (Retry-After)', {
      code: 'PGRST001',
      details: null,
      hint: null,
      message: 'Database client error. Retrying the connection.',
    }),
  };
  const table = Type.Object({ table: Type.String({ description: 'a table or view of the public schema' }) });
  // The query string and the body are read by the handler itself (filters repeat keys and keep their
  // order), so Fastify validates neither: the document alone describes them.
  const anyQuery = Type.Object({}, { additionalProperties: true, description: 'select, order, limit, offset, columns and <column>=<op>.<value> filters' });
  const text = (description: string, example?: string) => Type.Optional(Type.String({ description, ...(example && { examples: [example] }) }));
  const documentedQuery = (extra: Record<string, ReturnType<typeof text>>) =>
    Type.Object({
      select: text('Columns to return, comma-separated (reads; writes with Prefer: return=representation)', 'id,title,created_at'),
      ...extra,
    });
  const filtered = {
    order: text('Sort: <column>[.asc|.desc][.nullsfirst|.nullslast], comma-separated', 'created_at.desc'),
    limit: text('At most this many rows (a non-negative integer)', '10'),
    offset: text('Skip this many rows first (a non-negative integer)', '0'),
    or: text('Rows matching any of the filters: (<column>.<op>.<value>,…), nested and(…)/or(…), not. to negate; also and=, not.or=, not.and=', '(title.ilike.*milk*,body.ilike.*milk*)'),
    and: text('Rows matching all of the filters, written like or', '(id.gte.1,id.lte.9)'),
  };
  const FILTERS =
    'Filters: any other query parameter `<column>=<op>.<value>` keeps the rows where the column matches ' +
    '(eq, neq, gt, gte, lt, lte, like, ilike, is, in.(a,b), and not.<op>), e.g. `?id=eq.42&title=ilike.*draft*` ' +
    '(in like and ilike `*` stands for `%`); `or=(…)` and `and=(…)` combine filters; several filters all apply. ' +
    'PATCH and DELETE act on the rows the filters keep.';
  const headers = (prefer: string) =>
    Type.Object({
      prefer: text(prefer),
      accept: text('application/json (an array, the default) or application/vnd.pgrst.object+json (exactly one row as an object, else 406)'),
    });
  const RowsBody = Type.Union([Type.Object({}, { additionalProperties: true }), Type.Array(Type.Object({}, { additionalProperties: true }))], {
    description: 'One row as an object, or several as an array of objects (columns as keys)',
  });
  const rows = (description: string) => described(Rows, description, [{ id: 1, title: 'A note', body: null }]);
  const noBody = (description: string) => described(Type.Null(), description);
  const common = { tags: ['rest'], security: [...KEY_SECURITY, ...USER_SECURITY], params: table, querystring: anyQuery };

  scope.get(
    '/:table',
    {
      schema: {
        ...common,
        summary: 'Read rows',
        description: `${FILTERS} HEAD answers the same headers without a body. Content-Range gives the rows returned (and the total with Prefer: count=exact); Preference-Applied echoes the count and handling preferences applied.`,
        [DOCUMENT_ONLY]: { querystring: documentedQuery(filtered), headers: headers('count=exact: count every matching row (Content-Range total; 206 when not all are returned); handling=strict: an unknown or unsupported preference is 400 PGRST122') },
        response: { 200: rows('The rows (an array, or one object with the object Accept type)'), 206: rows('Some of the rows: Prefer: count=exact and more rows match than were returned'), 416: offsetPastEnd, ...errors },
      },
    },
    handle,
  );
  const WRITE_PREFER =
    'return=representation (answer with the rows written) or return=minimal (the default: no body); count=exact; ' +
    'handling=strict (an unknown or unsupported preference is 400 PGRST122) or handling=lenient (the default: ignored)';
  const APPLIED = 'Preference-Applied echoes the Prefer options applied.';
  const UPSERT_PREFER = `${WRITE_PREFER}; resolution=merge-duplicates or resolution=ignore-duplicates (upsert on on_conflict, else the primary key)`;
  const LIMIT_PREFER = `${WRITE_PREFER}; max-affected=N with handling=strict (more rows would change: 400 PGRST124, nothing changed)`;
  scope.post(
    '/:table',
    {
      schema: {
        ...common,
        summary: 'Insert rows',
        description: APPLIED,
        [DOCUMENT_ONLY]: {
          querystring: documentedQuery({
            columns: text('Only these columns of the body are inserted, comma-separated', 'title,body'),
            on_conflict: text('With Prefer: resolution=…, the unique columns a conflict is detected on (default: the primary key)', 'id'),
          }),
          headers: headers(UPSERT_PREFER),
          body: RowsBody,
        },
        response: { 201: described(Rows, 'Inserted: the rows with return=representation, otherwise no body', [{ id: 1, title: 'A note', body: null }]), ...errors },
      },
    },
    handle,
  );
  scope.patch(
    '/:table',
    {
      schema: {
        ...common,
        summary: 'Update the filtered rows',
        description: `${FILTERS} ${APPLIED}`,
        [DOCUMENT_ONLY]: {
          querystring: documentedQuery(filtered),
          headers: headers(LIMIT_PREFER),
          body: Type.Object({}, { additionalProperties: true, description: 'The columns to set and their new values' }),
        },
        response: { 200: rows('Updated: the rows, with return=representation'), 204: noBody('Updated (return=minimal)'), ...errors },
      },
    },
    handle,
  );
  scope.delete(
    '/:table',
    {
      schema: {
        ...common,
        summary: 'Delete the filtered rows',
        description: `${FILTERS} ${APPLIED}`,
        [DOCUMENT_ONLY]: { querystring: documentedQuery(filtered), headers: headers(LIMIT_PREFER) },
        response: { 200: rows('Deleted: the rows, with return=representation'), 204: noBody('Deleted (return=minimal)'), ...errors },
      },
    },
    handle,
  );
}
