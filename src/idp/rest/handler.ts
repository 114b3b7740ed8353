import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Pool } from '../../kit/db.js';
import { callers } from '../gateway.js';
import type { SigningKeys } from '../keys.js';
import { RestError, restErrors, toRestError } from './errors.js';
import { parseQueryParams } from './parse.js';
import { planCall, planDelete, planInsert, planRead, planUpdate, type StatementPlan } from './plan.js';
import { appliedPreferences, type Media, negotiateMedia, parsePrefer, type Preferences, requestIdentity } from './request.js';
import { returnsVoid, type SchemaCache, type SchemaSnapshot } from './schema-cache.js';
import { type BodyFormat, renderPlannedCount, renderSettings, renderStatement } from './sql.js';
import { runTransaction, type StatementResult } from './transaction.js';
import type { PreparedRead, StatementCache } from './statement-cache.js';
import type { WriteLimits } from './write-limits.js';

// One REST request, end to end: who it runs as, what it asks (parse.ts), what that means against
// the schema cache (plan.ts), the SQL (sql.ts), its transaction (transaction.ts) and the answer in
// PostgREST's terms (status, Content-Range, Preference-Applied, Content-Profile).

export type TxEnd = 'commit' | 'commit-allow-override' | 'rollback' | 'rollback-allow-override';

export interface RestSettings {
  /** The exposed schemas, the default first. */
  schemas: readonly string[];
  txEnd: TxEnd;
}

export interface RestContext {
  pool: Pool;
  schema: SchemaCache;
  keys: SigningKeys;
  settings: RestSettings;
  limits: WriteLimits;
  statements: StatementCache;
}

export type Method = 'GET' | 'HEAD' | 'POST' | 'PATCH' | 'DELETE';

/** What a request addresses: a table or view, or a function under /rpc. */
export type Target = { kind: 'table'; name: string } | { kind: 'call'; name: string };

// `count=estimated` counts exactly up to this many rows and takes the planner's estimate beyond,
// as PostgREST does with the max-rows a hosted Supabase project sets (1,000).
const ESTIMATE_BEYOND_ROWS = 1000;

export function sendRestError(reply: FastifyReply, error: RestError): FastifyReply {
  reply
    .code(error.status)
    .header('content-type', 'application/json; charset=utf-8')
    .header('proxy-status', `PostgREST; error=${error.code}`);
  if (error.retryAfterSeconds !== null) reply.header('retry-after', String(error.retryAfterSeconds));
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

/**
 * The schema a request addresses: Accept-Profile on reads, Content-Profile on writes (PostgREST's
 * profile negotiation), else the first exposed one. `negotiated` when a header chose it: the
 * response then names it in Content-Profile.
 */
function requestSchema(request: FastifyRequest, method: Method, exposed: readonly string[]): { schema: string; negotiated: boolean } {
  const header = method === 'GET' || method === 'HEAD' ? request.headers['accept-profile'] : request.headers['content-profile'];
  if (header === undefined) return { schema: exposed[0]!, negotiated: false };
  const schema = String(header);
  if (!exposed.includes(schema)) throw restErrors.invalidSchema(schema, exposed);
  return { schema, negotiated: true };
}

/** Plans against the cache; a miss plans once more against a cache read after it. The plan, and the snapshot's version. */
async function withSchema<T>(cache: SchemaCache, make: (snapshot: SchemaSnapshot) => T): Promise<{ value: T; version: number }> {
  const snapshot = cache.current;
  try {
    return { value: make(snapshot), version: snapshot.version };
  } catch (err) {
    if (!(err instanceof RestError) || !err.schemaMiss) throw err;
    const fresh = await cache.refreshAfterMiss(snapshot);
    return { value: make(fresh), version: fresh.version };
  }
}

function planFor(
  snapshot: SchemaSnapshot,
  method: Method,
  target: Target,
  schema: string,
  params: URLSearchParams,
  body: unknown,
  prefs: Preferences,
): StatementPlan {
  const parsed = parseQueryParams(params, { rpcRead: target.kind === 'call' && method !== 'POST' });
  if (target.kind === 'call') {
    return planCall(snapshot, schema, target.name, parsed, {
      method: method as 'GET' | 'HEAD' | 'POST',
      singleObject: prefs.singleObject,
      body,
    });
  }
  const write = {
    representation: prefs.representation === 'representation',
    applyDefaults: prefs.missing === 'default',
    resolution: prefs.resolution,
  };
  switch (method) {
    case 'GET':
    case 'HEAD':
      return planRead(snapshot, schema, target.name, parsed);
    case 'POST':
      if (body === undefined) throw restErrors.invalidBody(null);
      return planInsert(snapshot, schema, target.name, parsed, body, write);
    case 'PATCH':
      if (body === undefined) throw restErrors.invalidBody(null);
      return planUpdate(snapshot, schema, target.name, parsed, body, write);
    case 'DELETE':
      return planDelete(snapshot, schema, target.name, parsed, write);
  }
}

/** The total of Content-Range: exact, the planner's estimate, or exact up to a bound and the estimate beyond. */
function totalOf(count: Preferences['count'], result: StatementResult): number | null {
  switch (count) {
    case 'exact':
      return result.total;
    case 'planned':
      return result.plannedTotal;
    case 'estimated':
      return result.total !== null && result.total <= ESTIMATE_BEYOND_ROWS
        ? result.total
        : Math.max(result.total ?? 0, result.plannedTotal ?? 0);
    default:
      return null;
  }
}

function bodyFormat(media: Media, answered: boolean): BodyFormat {
  if (!answered) return { kind: 'none' };
  return media.kind === 'csv' ? { kind: 'csv' } : { kind: 'json', stripNulls: media.stripNulls };
}

/** What the result breaks, if anything: one object asked for and not one row, or more rows than max-affected. */
function resultError(plan: StatementPlan, media: Media, prefs: Preferences, result: StatementResult): RestError | null {
  // PostgREST undoes the whole request when one object was asked for and not exactly one row came.
  if (media.kind === 'object' && result.n !== 1 && !(plan.kind === 'call' && returnsVoid(plan.routine))) {
    return restErrors.notSingular(result.n);
  }
  // max-affected binds only with handling=strict; exceeding it undoes the change.
  const limited = plan.kind === 'update' || plan.kind === 'delete' || plan.kind === 'call';
  if (limited && prefs.handling === 'strict' && prefs.maxAffected !== null && result.n > prefs.maxAffected) {
    return restErrors.maxAffected(result.n);
  }
  return null;
}

/** The statements of a plan: the main one, and the EXPLAIN of a planned or estimated count. */
function prepare(plan: StatementPlan, method: Method, media: Media, prefs: Preferences): PreparedRead {
  const readOnly = plan.kind === 'read' || (plan.kind === 'call' && plan.readOnly);
  const answered = method !== 'HEAD' && (readOnly || plan.kind === 'call' || prefs.representation === 'representation');
  const counting = readOnly && prefs.count !== null;
  const statement = renderStatement(plan, {
    body: bodyFormat(media, answered),
    count: counting && prefs.count !== 'planned' ? { upTo: prefs.count === 'estimated' ? ESTIMATE_BEYOND_ROWS : null } : null,
  });
  const explain = counting && prefs.count !== 'exact' ? renderPlannedCount(plan) : null;
  return { plan, statement, explain };
}

export async function handleRest(ctx: RestContext, request: FastifyRequest, reply: FastifyReply, target: Target): Promise<FastifyReply> {
  const method = request.method as Method;
  let role: 'anon' | 'authenticated' | 'service_role' = 'anon';
  try {
    const identity = await requestIdentity(callers.get(request), ctx.keys);
    role = identity.role;
    const { schema, negotiated } = requestSchema(request, method, ctx.settings.schemas);
    const prefs = parsePrefer(request.headers.prefer, { txOverride: ctx.settings.txEnd.endsWith('-allow-override') });
    if (prefs.handling === 'strict' && prefs.invalid.length > 0) throw restErrors.invalidPreferences(prefs.invalid);
    const media = negotiateMedia(request.headers.accept);
    const body = request.body;
    if (target.kind === 'table' && method === 'POST' && Array.isArray(body)) ctx.limits.checkRows(body.length);

    // A read's statement depends only on what it asks, so the same read asked again is not planned again.
    const query = request.url.slice(request.url.indexOf('?') + 1 || request.url.length);
    const cacheKey =
      method === 'GET' || method === 'HEAD'
        ? `${method} ${target.kind} ${schema} ${prefs.count} ${media.kind} ${media.stripNulls} ${target.name.length}:${target.name} ${query}`
        : null;
    let prepared = cacheKey === null ? undefined : ctx.statements.get(ctx.schema.current.version, cacheKey);
    if (!prepared) {
      const planned = await withSchema(ctx.schema, (snapshot) =>
        planFor(snapshot, method, target, schema, queryParams(request.url), body, prefs),
      );
      prepared = prepare(planned.value, method, media, prefs);
      if (cacheKey !== null) ctx.statements.set(planned.version, cacheKey, prepared);
    }
    const { plan, statement, explain } = prepared;
    const readOnly = plan.kind === 'read' || (plan.kind === 'call' && plan.readOnly);
    const counting = readOnly && prefs.count !== null;
    const path = target.kind === 'call' ? `/rpc/${target.name}` : `/${target.name}`;
    const settings = renderSettings({ role, claims: identity.claims, method, path, schema, readOnly });

    if (!readOnly) {
      const units = plan.kind === 'insert' ? (Array.isArray(body) ? body.length : 1) : 1;
      await ctx.limits.charge(
        { role, userId: typeof identity.claims.sub === 'string' ? identity.claims.sub : null, ip: request.ip },
        units,
      );
    }
    const txEnd = ctx.settings.txEnd;
    const rollback = prefs.tx === 'rollback' || (txEnd.startsWith('rollback') && prefs.tx !== 'commit');
    const mayUndo = !readOnly && (media.kind === 'object' || (prefs.handling === 'strict' && prefs.maxAffected !== null));
    const result = await runTransaction(
      ctx.pool,
      { settings, main: statement, explain },
      { rollback: rollback && !readOnly, keep: mayUndo ? (r) => resultError(plan, media, prefs, r) === null : undefined },
    );
    const error = resultError(plan, media, prefs, result);
    if (error) return sendRestError(reply, error);

    const kind = plan.kind;
    const applied = appliedPreferences(prefs, kind, {
      resolutionApplies: kind === 'insert' && plan.onConflict !== null && plan.onConflict.target.length > 0,
    });
    if (applied.length > 0) reply.header('preference-applied', applied.join(', '));
    if (negotiated) reply.header('content-profile', schema);
    // The one row of the object media type is taken out of the array of rows; a function's scalar or
    // single row is already the value itself (which may be an array).
    const rowsArray = plan.kind !== 'call' || (plan.routine.returns.composite && plan.routine.returns.setOf);
    const responseBody = media.kind === 'object' && rowsArray && result.body.startsWith('[') ? result.body.slice(1, -1) : result.body;

    if (plan.kind === 'read' || plan.kind === 'call') {
      const { offset } = rootRange(plan);
      const total = totalOf(counting ? prefs.count : null, result);
      const range = result.n > 0 ? `${offset}-${offset + result.n - 1}/${total ?? '*'}` : `*/${total ?? '*'}`;
      reply.header('content-range', range);
      // PostgREST's rangeStatus: an offset past the counted rows is 416, not an empty page.
      if (total !== null && offset > total) return sendRestError(reply, restErrors.offsetPastEnd(offset, total));
      if (plan.kind === 'call' && returnsVoid(plan.routine)) return reply.code(204).send();
      const status = total !== null && result.n < total ? 206 : 200;
      reply.code(status).header('content-type', media.contentType);
      return method === 'HEAD' ? reply.send() : reply.send(responseBody);
    }
    reply.header('content-range', `*/${prefs.count === 'exact' ? result.n : '*'}`);
    // PostgREST answers an upsert that only merged existing rows with 200: nothing was created.
    const created = !(plan.kind === 'insert' && plan.onConflict?.resolution === 'merge-duplicates' && (result.inserted ?? 0) <= 0);
    const status = plan.kind === 'insert' ? (created ? 201 : 200) : prefs.representation === 'representation' ? 200 : 204;
    if (prefs.representation !== 'representation') return reply.code(status).send();
    return reply.code(status).header('content-type', media.contentType).send(responseBody);
  } catch (err) {
    const { error, expected } = toRestError(err, role);
    if (!expected) request.log.error({ err }, 'REST request failed');
    return sendRestError(reply, error);
  }
}

function rootRange(plan: StatementPlan & { kind: 'read' | 'call' }): { offset: number } {
  const root = plan.kind === 'read' ? plan.root : plan.read;
  return { offset: root.offset ?? 0 };
}
