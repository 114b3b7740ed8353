import { createHash, createPublicKey, generateKeyPairSync, randomBytes, timingSafeEqual, verify as verifySignature } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { systemClock } from '../src/kit/clock.js';
import { createPool } from '../src/kit/db.js';
import { hasLowSSignature, isCanonicalCompactJws } from '../src/kit/jws.js';
import { SessionStore } from '../src/idp/auth/store/sessions.js';
import { toUser } from '../src/idp/auth/user.js';
import { authenticatorPassword, authenticatorRoleName, authenticatorUrl } from '../src/idp/authenticator.js';
import { ACCESS_TOKEN_AUDIENCE, SigningKeys } from '../src/idp/keys.js';
import { parseQueryParams } from '../src/idp/rest/parse.js';
import { planCall, planRead, type StatementPlan } from '../src/idp/rest/plan.js';
import { SchemaCache } from '../src/idp/rest/schema-cache.js';
import { renderSettings, renderStatement, type SqlStatement } from '../src/idp/rest/sql.js';
import { runTransaction } from '../src/idp/rest/transaction.js';
import {
  BENCH_ROUNDS,
  type LoadOptions,
  type LoadResult,
  cpuDuring,
  cpuPerRequest,
  databaseBackendPids,
  defaultGenerator,
  freshBenchDatabase,
  load,
  ratio,
  referenceConfig,
  startCeiling,
  startReference,
  startService,
} from './lib.js';

// The idp's REST API beside a minimal node:http reference that does the same work: the same
// apikey check (SHA-256 digests compared in constant time), the same JWT check (the idp's own
// ES256 verifier, with its cache of verified tokens, 30 s of leeway, audience and role), the same
// SQL (rendered once, here, by the idp's own planner), in the same one-round-trip transaction
// (settings and query in one pipeline with one Sync), on a pool of the same size connected as the
// same login role, answering the same headers and body. What remains between the two is what the
// framework, the hooks and the idp's own parsing and planning add. A bare node:http server with
// no database is printed for context.
//
// Three paths, for one user with 50 notes under row-level security: the list notes reads (the
// request supabase-js sends), the same list with each note's labels embedded (a joined table,
// also under row-level security), and a call of a function that searches them. Each is measured
// in three alternating rounds (BENCH_ROUNDS; reference first, then the idp first, then the
// reference first again); the table gives the medians, with the CPU time per request of the server and of
// PostgreSQL's backends beside each ratio. BENCH_SECONDS (default 10) sets each run's length.
//
// And GET /auth/v1/user (what notes asks the idp for every call), beside the same reference
// answering it with the same work: the same apikey check, the ES256 check with node:crypto (the
// header's alg pinned and its kid ours before the key is used, only the low-s spelling of a
// signature, the verified tokens remembered as the idp remembers them, exp checked on every
// request), the audience, sub and session_id claims, the same one-statement read of the user and
// the session (the idp's own named statement, on a pool of the idp's size, 5, connected as the
// idp), the banned check and the same user JSON (GoTrue's shape, compared before the runs).

const NOTES = 50;
const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const REFERENCE_FLAG = '--idp-rest-reference';

interface Route {
  /** Path and query, exactly as the load generator sends it. */
  url: string;
  method: 'GET' | 'POST';
  /** The statement the idp renders for it; a POST binds its body as the statement's one value. */
  statement: SqlStatement;
  /** The path request.path is set to. */
  requestPath: string;
  readOnly: boolean;
  /** Content-Range needs the offset, always 0 here. */
}

interface ReferenceConfig {
  port: number;
  /** The idp's own connection, for the /auth/v1/user read. */
  databaseUrl: string;
  restUrl: string;
  publishableKey: string;
  secretKey: string;
  signingKey: string;
  routes: Route[];
}

// ---------------------------------------------------------------------------------------------
// The reference: node:http, nothing else.

async function serveReference(config: ReferenceConfig): Promise<void> {
  const pool = createPool(config.restUrl, { max: 10, applicationName: 'idp-rest-reference' });
  const keys = await SigningKeys.load(config.signingKey, mkdtempSync(path.join(tmpdir(), 'idp-rest-ref-')), systemClock);
  const digest = (v: string) => createHash('sha256').update(v).digest();
  const publishable = digest(config.publishableKey);
  const secret = digest(config.secretKey);
  const routes = new Map(config.routes.map((r) => [`${r.method} ${r.url}`, r]));
  const user = userReference(config, keys.kid);
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify(body));
  };
  const server = http.createServer(async (req, res) => {
    try {
      const apikey = req.headers.apikey;
      if (typeof apikey !== 'string') return json(res, 401, { message: 'No API key found in request' });
      const given = digest(apikey);
      const isPublishable = timingSafeEqual(given, publishable);
      const isSecret = timingSafeEqual(given, secret);
      if (!isPublishable && !isSecret) return json(res, 401, { message: 'Invalid API key' });
      if (req.method === 'GET' && req.url === '/auth/v1/user') return await user(req, res);
      // `/three-round-trips/…`: the same work in three round trips, as the idp did before (BEGIN with
      // the settings as one simple-protocol message, then the query, then COMMIT): the measure of
      // what one round trip saves.
      const threeRoundTrips = req.url?.startsWith(THREE_ROUND_TRIPS) ?? false;
      const url = threeRoundTrips ? req.url!.slice(THREE_ROUND_TRIPS.length) : req.url;
      const route = routes.get(`${req.method} ${url}`);
      if (!route) return json(res, 400, { message: 'not a route of the reference' });
      const bearer = /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
      if (!bearer) return json(res, 401, { message: 'a user token is needed' });
      const verified = await keys.verify(bearer, { expLeewaySeconds: 30 });
      if (!verified.ok) return json(res, 401, { code: 'PGRST301', message: verified.problem.kind });
      const aud = verified.claims.aud;
      if (!(Array.isArray(aud) ? aud : [aud]).includes(ACCESS_TOKEN_AUDIENCE)) return json(res, 401, { code: 'PGRST303' });
      const role = verified.claims.role;
      if (role !== 'authenticated') return json(res, 401, { code: '22023' });
      let values = route.statement.values;
      if (route.method === 'POST') {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        const text = Buffer.concat(chunks).toString('utf8');
        const body = JSON.parse(text) as unknown;
        if (typeof body !== 'object' || body === null || typeof (body as { q?: unknown }).q !== 'string') {
          return json(res, 400, { code: 'PGRST102' });
        }
        values = [JSON.stringify(body)];
      }
      const settings = renderSettings({
        role: 'authenticated',
        claims: verified.claims,
        method: route.method,
        path: route.requestPath,
        schema: 'public',
        readOnly: route.readOnly,
      });
      const result = threeRoundTrips
        ? await inThreeRoundTrips(pool, route, verified.claims, values)
        : await runTransaction(pool, { settings, main: { text: route.statement.text, values }, explain: null }, { rollback: false });
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'content-range': result.n > 0 ? `0-${result.n - 1}/*` : '*/*',
      });
      res.end(result.body);
    } catch (err) {
      json(res, 500, { message: (err as Error).message });
    }
  });
  server.listen(config.port, '127.0.0.1');
}

const THREE_ROUND_TRIPS = '/three-round-trips';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const FORBIDDEN_HEADERS = ['jku', 'jwk', 'x5u', 'x5c', 'crit'];
/** As many verified tokens as the idp remembers. */
const VERIFIED_TOKENS = 10_000;

/** GET /auth/v1/user after the apikey check: ES256 with node:crypto, then the idp's one read. */
function userReference(config: ReferenceConfig, kid: string) {
  const pool = createPool(config.databaseUrl, { max: 5, applicationName: 'idp-user-reference' });
  const sessions = new SessionStore(pool);
  const publicKey = createPublicKey(config.signingKey);
  const verified = new Map<string, Record<string, unknown>>();
  const segment = (text: string) => {
    try {
      const value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown;
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  };
  const signatureClaims = (token: string): Record<string, unknown> | undefined => {
    if (!isCanonicalCompactJws(token)) return undefined;
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const h = segment(header);
    if (h?.alg !== 'ES256' || h.kid !== kid || FORBIDDEN_HEADERS.some((name) => Object.hasOwn(h, name))) return undefined;
    if (!hasLowSSignature(token)) return undefined;
    const ok = verifySignature(
      'sha256',
      Buffer.from(`${header}.${payload}`),
      { key: publicKey, dsaEncoding: 'ieee-p1363' },
      Buffer.from(signature, 'base64url'),
    );
    return ok ? segment(payload) : undefined;
  };
  const fail = (res: http.ServerResponse, status: number, message: string) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ code: status, error_code: 'bad_jwt', msg: message }));
  };
  return async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const token = /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
    if (!token) return fail(res, 401, 'no token');
    let claims = verified.get(token);
    if (!claims) {
      claims = signatureClaims(token);
      if (!claims) return fail(res, 403, 'invalid JWT');
      if (verified.size >= VERIFIED_TOKENS) verified.delete(verified.keys().next().value!);
      verified.set(token, claims);
    }
    const { exp, sub, session_id: sessionId, aud } = claims;
    if (typeof exp !== 'number' || Math.floor(Date.now() / 1000) >= exp) return fail(res, 403, 'token is expired');
    if (typeof sub !== 'string' || !UUID.test(sub) || typeof sessionId !== 'string' || !UUID.test(sessionId)) {
      return fail(res, 403, 'invalid claim');
    }
    const found = await sessions.findUserWithSession(sub, sessionId);
    if (!found?.session || found.session.user_id !== found.user.id) return fail(res, 403, 'session not found');
    if (found.user.banned_until !== null && found.user.banned_until.getTime() > Date.now()) return fail(res, 403, 'banned');
    if (aud !== ACCESS_TOKEN_AUDIENCE) return fail(res, 403, 'audience');
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify(toUser(found.user)));
  };
}

async function inThreeRoundTrips(pool: pg.Pool, route: Route, claims: Record<string, unknown>, values: Array<string | null>) {
  const client = await pool.connect();
  try {
    const literal = (v: string) => client.escapeLiteral(v);
    await client.query(
      `${route.readOnly ? 'BEGIN READ ONLY' : 'BEGIN'};
       SELECT set_config('role', 'authenticated', true), set_config('request.jwt.claims', ${literal(JSON.stringify(claims))}, true),
              set_config('search_path', 'public', true), set_config('request.method', ${literal(route.method)}, true),
              set_config('request.path', ${literal(route.requestPath)}, true)`,
    );
    const { rows } = await client.query<{ body: string; n: number }>(route.statement.text, values);
    await client.query('COMMIT');
    return rows[0]!;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

if (process.argv.includes(REFERENCE_FLAG)) await serveReference(referenceConfig<Omit<ReferenceConfig, 'port'>>());

// ---------------------------------------------------------------------------------------------
// The bench

async function json(url: string, init: RequestInit & { body?: string } = {}): Promise<any> {
  const res = await fetch(url, { ...init, headers: { 'content-type': 'application/json', ...init.headers } });
  const text = await res.text();
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${url}: ${res.status} ${text}`);
  return text === '' ? null : JSON.parse(text);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

type Measured = { r: LoadResult; cpu: ReturnType<typeof cpuPerRequest> };

export async function run(ctx: { adminUrl: string }): Promise<Array<Record<string, string | number>>> {
  const database = 'bench_idp_rest';
  const databaseUrl = await freshBenchDatabase(ctx.adminUrl, database);
  const keys = {
    IDP_PUBLISHABLE_KEY: `sb_publishable_bench${randomBytes(12).toString('hex')}`,
    IDP_SECRET_KEY: `sb_secret_bench${randomBytes(12).toString('hex')}`,
  };
  const signingKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  // Sign-ups confirmed at once, as under npm start: the bench's user signs in without a mail.
  const idp = await startService('src/idp/server.ts', {
    ...keys,
    DATABASE_URL: databaseUrl,
    IDP_SIGNING_KEY: signingKey,
    IDP_AUTOCONFIRM: 'true',
  });
  // The same idp at the production default log level (info: one access line a request), measured on
  // the plain read and /auth/v1/user beside the same reference, so logging's cost is read off the
  // same run (the rows above it: warn).
  const idpAtInfo = await startService('src/idp/server.ts', {
    ...keys,
    DATABASE_URL: databaseUrl,
    IDP_SIGNING_KEY: signingKey,
    IDP_AUTOCONFIRM: 'true',
    LOG_LEVEL: 'info',
  });
  let reference: Awaited<ReturnType<typeof startReference>> | undefined;
  const ceiling = await startCeiling('json');
  try {
    // One user with 50 notes, each with a label, and a search function; all under row-level security.
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    try {
      await admin.query(`
        create table public.note_labels (
          id bigint generated always as identity primary key,
          note_id bigint not null references public.notes (id) on delete cascade,
          user_id uuid not null default auth.uid() references auth.users (id) on delete cascade,
          label text not null);
        create index note_labels_note_id_idx on public.note_labels (note_id);
        alter table public.note_labels enable row level security;
        create policy note_labels_own on public.note_labels for select to authenticated using ((select auth.uid()) = user_id);
        grant select on public.note_labels to authenticated;
        create function public.search_notes(q text) returns setof public.notes language sql stable
          as $$ select * from public.notes where title ilike '%' || q || '%' $$;`);
    } finally {
      await admin.end();
    }
    const email = `bench-${randomBytes(4).toString('hex')}@example.com`;
    const password = 'bench-password-1234';
    const signedUp = await json(`${idp.url}/auth/v1/signup`, {
      method: 'POST',
      headers: { apikey: keys.IDP_PUBLISHABLE_KEY },
      body: JSON.stringify({ email, password }),
    });
    const token = signedUp.access_token as string;
    const user = { apikey: keys.IDP_PUBLISHABLE_KEY, authorization: `Bearer ${token}` };
    for (let i = 0; i < NOTES; i++) {
      const [note] = await json(`${idp.url}/rest/v1/notes?select=id`, {
        method: 'POST',
        headers: { ...user, prefer: 'return=representation' },
        body: JSON.stringify({ title: `note ${i}`, body: 'x'.repeat(200) }),
      });
      const labeler = new pg.Client({ connectionString: databaseUrl });
      await labeler.connect();
      await labeler.query('insert into public.note_labels (note_id, user_id, label) values ($1, $2, $3)', [
        note.id,
        signedUp.user.id,
        `label ${i}`,
      ]);
      await labeler.end();
    }

    // The statements the idp renders for the three requests, from its own planner.
    const catalog = createPool(databaseUrl, { max: 2 });
    const cache = new SchemaCache(catalog, { schemas: ['public'], warn: () => {} });
    await cache.reload('bench');
    const render = (plan: StatementPlan) => renderStatement(plan, { body: { kind: 'json', stripNulls: false }, count: null });
    const query = (q: string) => parseQueryParams(new URLSearchParams(q));
    const paths = {
      plain: '/rest/v1/notes?select=*&order=created_at.desc%2Cid.desc',
      embedded: '/rest/v1/notes?select=id,title,created_at,note_labels(label)&order=created_at.desc%2Cid.desc',
      rpc: '/rest/v1/rpc/search_notes',
    };
    const routes: Route[] = [
      {
        url: paths.plain,
        method: 'GET',
        statement: render(planRead(cache.current, 'public', 'notes', query('select=*&order=created_at.desc,id.desc'))),
        requestPath: '/notes',
        readOnly: true,
      },
      {
        url: paths.embedded,
        method: 'GET',
        statement: render(
          planRead(cache.current, 'public', 'notes', query('select=id,title,created_at,note_labels(label)&order=created_at.desc,id.desc')),
        ),
        requestPath: '/notes',
        readOnly: true,
      },
      {
        url: paths.rpc,
        method: 'POST',
        statement: render(
          planCall(cache.current, 'public', 'search_notes', query(''), { method: 'POST', singleObject: false, body: { q: 'note 1' } }),
        ),
        requestPath: '/rpc/search_notes',
        readOnly: true,
      },
    ];
    await catalog.end();
    const role = authenticatorRoleName(database);
    reference = await startReference(fileURLToPath(import.meta.url), REFERENCE_FLAG, {
      databaseUrl,
      restUrl: authenticatorUrl(databaseUrl, role, authenticatorPassword(keys.IDP_SECRET_KEY, role)),
      publishableKey: keys.IDP_PUBLISHABLE_KEY,
      secretKey: keys.IDP_SECRET_KEY,
      signingKey,
      routes,
    });

    // Both answer the same bytes.
    const rpcBody = JSON.stringify({ q: 'note 1' });
    for (const [p, method, body] of [
      [paths.plain, 'GET', undefined],
      [paths.embedded, 'GET', undefined],
      [paths.rpc, 'POST', rpcBody],
    ] as const) {
      const a = await fetch(`${idp.url}${p}`, { method, headers: { ...user, 'content-type': 'application/json' }, body }).then((r) =>
        r.text(),
      );
      const b = await fetch(`${reference.url}${p}`, { method, headers: { ...user, 'content-type': 'application/json' }, body }).then((r) =>
        r.text(),
      );
      if (a !== b) throw new Error(`the idp and the reference answer ${p} differently:\n${a.slice(0, 300)}\n${b.slice(0, 300)}`);
    }
    // GET /auth/v1/user as notes sends it: the secret key and the user's token; the same user JSON.
    const asNotes = { apikey: keys.IDP_SECRET_KEY, authorization: `Bearer ${token}` };
    const users = await Promise.all(
      [idp, reference].map((s) => fetch(`${s.url}/auth/v1/user`, { headers: asNotes }).then(async (r) => [r.status, await r.json()])),
    );
    if (!isDeepStrictEqual(users[0], users[1])) {
      throw new Error(
        `the idp and the reference answer /auth/v1/user differently:\n${JSON.stringify(users[0])}\n${JSON.stringify(users[1])}`,
      );
    }
    if ((JSON.parse(await fetch(`${idp.url}${paths.plain}`, { headers: user }).then((r) => r.text())) as unknown[]).length !== NOTES) {
      throw new Error(`expected ${NOTES} notes`);
    }

    const generator = defaultGenerator();
    console.log(`idp-rest: load generator ${generator}`);
    const backends = () => databaseBackendPids(ctx.adminUrl, database);
    const measured = async (opts: LoadOptions, pids: number[], db?: () => Promise<number[]>): Promise<Measured> => {
      await load({ ...opts, durationSeconds: 2 });
      const m = await cpuDuring(() => load(opts), pids, db);
      return { r: m.result, cpu: cpuPerRequest(m, m.result.requests) };
    };
    const base = { connections: 50, durationSeconds: DURATION_SECONDS, generator };
    const runs: Record<string, Measured[]> = {};
    const keep = (name: string, m: Measured) => {
      runs[name] ??= [];
      runs[name]!.push(m);
    };
    // BENCH_IDP_PATHS=user,plain (any of plain, embedded, rpc, user) measures only those, for a profile of one path.
    const only = process.env.BENCH_IDP_PATHS?.split(',');
    const kinds = [
      { name: 'plain', opts: { url: `${paths.plain}`, headers: user } },
      { name: 'embedded', opts: { url: `${paths.embedded}`, headers: user } },
      { name: 'rpc', opts: { url: paths.rpc, method: 'POST', headers: { ...user, 'content-type': 'application/json' }, body: rpcBody } },
      { name: 'user', opts: { url: '/auth/v1/user', headers: asNotes } },
    ].filter((kind) => !only || only.includes(kind.name));
    for (let round = 0; round < BENCH_ROUNDS; round++) {
      keep('bare', await measured({ ...base, url: ceiling.url }, [ceiling.pid]));
      for (const kind of kinds) {
        const servers: Array<readonly [string, { url: string; pid: number }]> = [
          ['reference', reference],
          ['idp', idp],
          ...(kind.name === 'plain' || kind.name === 'user' ? [['idp at info', idpAtInfo] as const] : []),
        ];
        if (kind.name === 'plain') {
          const opts = {
            ...base,
            ...kind.opts,
            url: `${reference.url}${THREE_ROUND_TRIPS}${kind.opts.url}`,
            paths: [`${THREE_ROUND_TRIPS}${kind.opts.url}`],
          };
          keep('plain three round trips', await measured(opts, [reference.pid], backends));
        }
        for (const [who, server] of round % 2 === 0 ? servers : [...servers].reverse()) {
          // `paths`, since wrk would otherwise send the URL's path without its query.
          keep(
            `${kind.name} ${who}`,
            await measured({ ...base, ...kind.opts, url: `${server.url}${kind.opts.url}`, paths: [kind.opts.url] }, [server.pid], backends),
          );
        }
      }
    }

    const summary = (name: string) => {
      const ms = runs[name]!;
      return {
        rps: median(ms.map((m) => m.r.rps)),
        p99: median(ms.map((m) => m.r.p99)),
        p50: median(ms.map((m) => m.r.p50)),
        service: median(ms.map((m) => m.cpu.service ?? 0)),
        database: median(ms.map((m) => m.cpu.database ?? 0)),
        statuses: [...new Set(ms.flatMap((m) => Object.entries(m.r.statusCounts).map(([s, n]) => `${s}×${n}`)))].join(' '),
        errors: ms.reduce((sum, m) => sum + m.r.errors, 0),
      };
    };
    const µs = (n: number) => n.toFixed(0);
    const rows: Array<Record<string, string | number>> = [];
    const bare = summary('bare');
    rows.push({
      run: `bare node:http JSON (context), ${generator}`,
      'req/s': Math.round(bare.rps),
      'p50 ms': bare.p50,
      'p99 ms': bare.p99,
      'CPU µs/req': `${µs(bare.service)}`,
      statuses: bare.statuses,
      errors: bare.errors,
    });
    const labels = {
      plain: `GET notes (${NOTES} rows, RLS)`,
      embedded: `GET notes with their labels embedded (${NOTES} rows, RLS on both)`,
      rpc: `POST rpc/search_notes (11 rows, RLS)`,
      user: 'GET /auth/v1/user (secret key and user token, as notes sends it)',
    } as const;
    for (const kind of ['plain', 'embedded', 'rpc', 'user'] as const) {
      if (only && !only.includes(kind)) continue;
      const ref = summary(`${kind} reference`);
      const own = summary(`${kind} idp`);
      const throughput = ratio(own.rps, ref.rps);
      const cpuRatio = ratio(own.service + own.database, ref.service + ref.database);
      const p99Ratio = ratio(own.p99, ref.p99);
      rows.push({
        run: `${labels[kind]}: reference (node:http, one round trip)`,
        'req/s': Math.round(ref.rps),
        'p50 ms': ref.p50,
        'p99 ms': ref.p99,
        'CPU µs/req': `${µs(ref.service)} + ${µs(ref.database)}`,
        statuses: ref.statuses,
        errors: ref.errors,
      });
      if (kind === 'plain') {
        const three = summary('plain three round trips');
        rows.push({
          run: `${labels[kind]}: reference, the same statements in three round trips`,
          'req/s': Math.round(three.rps),
          'p50 ms': three.p50,
          'p99 ms': three.p99,
          'CPU µs/req': `${µs(three.service)} + ${µs(three.database)}`,
          'vs reference': `${ratio(three.rps, ref.rps).toFixed(2)} req/s, ${ratio(three.service + three.database, ref.service + ref.database).toFixed(2)}x CPU`,
          statuses: three.statuses,
          errors: three.errors,
        });
      }
      rows.push({
        run: `${labels[kind]}: idp`,
        'req/s': Math.round(own.rps),
        'p50 ms': own.p50,
        'p99 ms': own.p99,
        'CPU µs/req': `${µs(own.service)} + ${µs(own.database)}`,
        'vs reference': `${throughput.toFixed(2)} req/s, ${cpuRatio.toFixed(2)}x CPU, ${p99Ratio.toFixed(2)}x p99`,
        target: kind === 'plain' || kind === 'user' ? '>= 0.85, <= 1.2x CPU, <= 1.5x p99' : 'reported',
        met: kind === 'plain' || kind === 'user' ? (throughput >= 0.85 && cpuRatio <= 1.2 && p99Ratio <= 1.5 ? 'yes' : 'NO') : '',
        statuses: own.statuses,
        errors: own.errors,
      });
      if (runs[`${kind} idp at info`]) {
        const info = summary(`${kind} idp at info`);
        rows.push({
          run: `${labels[kind]}: idp at LOG_LEVEL=info (the default; the row above: warn)`,
          'req/s': Math.round(info.rps),
          'p50 ms': info.p50,
          'p99 ms': info.p99,
          'CPU µs/req': `${µs(info.service)} + ${µs(info.database)}`,
          'vs reference': `${ratio(info.rps, ref.rps).toFixed(2)} req/s, ${ratio(info.service + info.database, ref.service + ref.database).toFixed(2)}x CPU, ${ratio(info.p99, ref.p99).toFixed(2)}x p99; logging ${µs(info.service - own.service)} µs/req`,
          target: 'reported',
          statuses: info.statuses,
          errors: info.errors,
        });
      }
    }
    return rows;
  } finally {
    await ceiling.stop();
    await reference?.stop();
    await idp.stop();
    await idpAtInfo.stop();
  }
}
