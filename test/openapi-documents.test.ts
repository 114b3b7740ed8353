// The OpenAPI document of each service (/docs/json): valid OpenAPI, every route tagged, summarised,
// its responses described, its protected routes declaring their security; and the answers the
// services really send, successes and each class of error, match what the document says of that
// route and status (a status the document does not list is a failure).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Type } from '@sinclair/typebox';
import { decodeJwt as decodeJwtPayload } from 'jose';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { seedAdmin } from '../src/accounts/admin-seed.js';
import { UsersRepository } from '../src/accounts/repository.js';
import { commonVars, loadConfig } from '../src/kit/config.js';
import { type App, buildHttpApp } from '../src/kit/http/app.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import { startAccounts, type RunningAccounts } from './helpers/accounts.js';
import { type RunningIdp, startIdp } from './helpers/idp.js';
import { uniqueEmail } from './helpers/emails.js';
import { request } from './helpers/http.js';
import { type RunningNotes, startNotes } from './helpers/notes.js';
import { startShortener, type RunningShortener, withShortener } from './helpers/shortener.js';
import { uniqueIp } from './helpers/client-ips.js';

type Doc = {
  paths: Record<string, Record<string, Operation>>;
  components?: { securitySchemes?: Record<string, unknown> };
};
type Operation = {
  tags?: string[];
  summary?: string;
  security?: Array<Record<string, string[]>>;
  responses: Record<string, { description: string; content?: Record<string, { schema: object }>; headers?: Record<string, unknown> }>;
};

// Every answer of the apps built here is also checked by the kit's onSend hook against the app's
// own document (npm test turns OPENAPI_RESPONSE_CHECK on; the helpers pass it to each config).

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head'] as const;
const ADMIN_KEY = 'openapi-documents-admin-key-0123456789';

/** Which routes must declare which security scheme, per service (paths as the document writes them). */
const PROTECTED: Record<string, Array<[method: string, path: string, scheme: string]>> = {
  shortener: [
    ['get', '/api/links', 'adminKey'],
    ['patch', '/api/links/{code}', 'adminKey'],
    ['delete', '/api/links/{code}', 'adminKey'],
    ['get', '/api/links/export', 'adminKey'],
    ['get', '/api/links/{code}/visits/export', 'manageToken'],
  ],
  accounts: [
    ['get', '/auth/me', 'bearerAuth'],
    ['get', '/admin/users', 'bearerAuth'],
    ['post', '/auth/logout', 'bearerAuth'],
    ['get', '/auth/sessions', 'bearerAuth'],
    ['delete', '/auth/sessions/{id}', 'bearerAuth'],
    ['post', '/auth/password', 'bearerAuth'],
    ['patch', '/admin/users/{id}', 'bearerAuth'],
    ['delete', '/admin/users/{id}', 'bearerAuth'],
    ['get', '/admin/audit', 'bearerAuth'],
  ],
  notes: [
    ['get', '/notes', 'bearerAuth'],
    ['post', '/notes', 'bearerAuth'],
    ['delete', '/notes/{id}', 'bearerAuth'],
  ],
  idp: [
    ['post', '/auth/v1/signup', 'apikey'],
    ['post', '/auth/v1/token', 'apikey'],
    ['get', '/auth/v1/user', 'bearerAuth'],
    ['post', '/auth/v1/logout', 'bearerAuth'],
    ['post', '/auth/v1/admin/users', 'apikey'],
    ['delete', '/auth/v1/admin/users/{id}', 'apikey'],
    ['get', '/rest/v1/{table}', 'apikey'],
    ['post', '/rest/v1/{table}', 'apikey'],
    ['patch', '/rest/v1/{table}', 'apikey'],
    ['delete', '/rest/v1/{table}', 'apikey'],
  ],
};

let shortener: RunningShortener;
let accounts: RunningAccounts;
let idp: RunningIdp;
let notes: RunningNotes;
const docs: Record<string, Doc> = {};

before(async () => {
  shortener = await startShortener({ env: { SHORTENER_ADMIN_KEY: ADMIN_KEY } });
  accounts = await startAccounts();
  idp = await startIdp();
  notes = await startNotes({ idp });
  docs.shortener = (await shortener.app.inject({ method: 'GET', url: '/docs/json' })).json() as Doc;
  docs.accounts = (await accounts.app.inject({ method: 'GET', url: '/docs/json' })).json() as Doc;
  docs.notes = (await notes.app.inject({ method: 'GET', url: '/docs/json' })).json() as Doc;
  docs.idp = (await (await fetch(`${idp.url}/docs/json`)).json()) as Doc;
});

after(async () => {
  await notes?.close();
  await idp?.close();
  await shortener?.close();
  await accounts?.close();
});

function operations(doc: Doc): Array<{ method: string; path: string; op: Operation }> {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ method, path, op: item[method]! })),
  );
}

describe('OpenAPI documents', () => {
  for (const service of ['shortener', 'accounts', 'notes', 'idp']) {
    test(`${service}: /docs/json is a valid OpenAPI document`, async () => {
      const result = await new Validator().validate(structuredClone(docs[service]!));
      assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    });

    test(`${service}: every route has tags, a summary and described responses`, () => {
      const ops = operations(docs[service]!);
      assert.ok(ops.length > 0);
      for (const { method, path, op } of ops) {
        const where = `${method.toUpperCase()} ${path}`;
        assert.ok(op.tags && op.tags.length > 0, `${where}: no tags`);
        assert.ok(!op.tags.includes('default'), `${where}: tag default`);
        assert.ok(op.summary, `${where}: no summary`);
        const described = Object.values(op.responses).filter((r) => r.description && r.description !== 'Default Response');
        assert.ok(described.length > 0, `${where}: no described response`);
        for (const [status, r] of Object.entries(op.responses)) {
          assert.notEqual(r.description, 'Default Response', `${where} ${status}: undescribed`);
          const media = r.content?.['application/json'] as { example?: unknown; examples?: unknown } | undefined;
          if (Number(status) >= 400 && media) assert.ok(media.example ?? media.examples, `${where} ${status}: no example`);
        }
        assert.ok(!/.\/$/.test(path), `${where}: trailing slash`);
      }
    });

    test(`${service}: protected routes declare their security scheme, and the schemes exist`, () => {
      const doc = docs[service]!;
      const schemes = doc.components?.securitySchemes ?? {};
      for (const [method, path, scheme] of PROTECTED[service]!) {
        const op = doc.paths[path]?.[method];
        assert.ok(op, `${method.toUpperCase()} ${path} is not in the document`);
        const named = (op.security ?? []).flatMap((requirement) => Object.keys(requirement));
        assert.ok(named.includes(scheme), `${method.toUpperCase()} ${path} does not declare ${scheme}`);
      }
      for (const { method, path, op } of operations(doc)) {
        for (const name of (op.security ?? []).flatMap((requirement) => Object.keys(requirement))) {
          assert.ok(schemes[name], `${method.toUpperCase()} ${path}: security scheme ${name} is not defined`);
        }
      }
    });
  }

  test('shortener: the redirect documents its 302 and Location header; the admin key is an HTTP bearer scheme', () => {
    const redirect = docs.shortener!.paths['/{code}']!.get!;
    assert.ok(redirect.responses['302'], 'no 302');
    assert.ok(redirect.responses['302'].headers?.Location ?? redirect.responses['302'].headers?.location, 'no Location header');
    assert.deepEqual(docs.shortener!.components?.securitySchemes?.adminKey, {
      type: 'http',
      scheme: 'bearer',
      description: (docs.shortener!.components!.securitySchemes!.adminKey as { description: string }).description,
    });
  });

  test('idp: the REST routes document select, order, limit, offset, filters and Prefer', () => {
    const get = docs.idp!.paths['/rest/v1/{table}']!.get! as Operation & { parameters: Array<{ name: string; in: string }> };
    const names = get.parameters.map((p) => `${p.in}:${p.name.toLowerCase()}`);
    for (const expected of ['query:select', 'query:order', 'query:limit', 'query:offset', 'header:prefer', 'path:table']) {
      assert.ok(names.includes(expected), `${expected} missing from ${names.join(', ')}`);
    }
    const post = docs.idp!.paths['/rest/v1/{table}']!.post! as Operation & { requestBody?: unknown };
    assert.ok(post.requestBody, 'POST /rest/v1/{table} has no request body');
  });
});

// ---------------------------------------------------------------------------------------------

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));

interface Answer {
  status: number;
  body: string;
  contentType: string | undefined;
}

/** Checks one answer against the document's response for that route and status. */
function assertDocumented(service: string, method: string, path: string, answer: Answer): void {
  const where = `${service} ${method} ${path} → ${answer.status}`;
  const op = docs[service]!.paths[path]?.[method.toLowerCase()];
  assert.ok(op, `${where}: route not in the document`);
  const documented = op.responses[String(answer.status)];
  assert.ok(documented, `${where}: status not in the document (${answer.body.slice(0, 200)})`);
  const schema = documented.content?.['application/json']?.schema;
  if (!schema || !answer.contentType?.includes('json')) return;
  const body: unknown = answer.body === '' ? null : JSON.parse(answer.body);
  const validate = ajv.compile(schema);
  assert.ok(validate(body), `${where}: ${ajv.errorsText(validate.errors)} in ${answer.body.slice(0, 300)}`);
}

async function inject(
  app: App,
  method: string,
  url: string,
  opts: { body?: unknown; rawBody?: string; headers?: Record<string, string>; ip?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...opts.headers };
  let payload: string | undefined;
  if (opts.rawBody !== undefined) payload = opts.rawBody;
  else if (opts.body !== undefined) payload = JSON.stringify(opts.body);
  if (payload !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await app.inject({ method: method as 'GET', url, headers, payload, remoteAddress: opts.ip ?? uniqueIp() });
  return { status: res.statusCode, body: res.body, contentType: res.headers['content-type'] as string | undefined };
}

/** The same over real HTTP (notes and the idp). */
async function overHttp(
  base: string,
  method: string,
  url: string,
  opts: { body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const res = await request(base, method, url, { body: opts.body, raw: opts.rawBody, headers: opts.headers });
  return { status: res.status, body: res.text, contentType: res.headers.get('content-type') ?? undefined };
}

describe('responses match the document', () => {
  test('the response check turns a status the document does not list, or a body its schema refuses, into a 500 naming it', async () => {
    const app = await buildHttpApp({
      title: 'check',
      logLevel: 'silent',
      errorBody: statusEnvelope,
      readiness: async () => {},
      responseCheck: true,
    });
    const Answer = Type.Object({ a: Type.String() });
    app.get('/listed', { schema: { tags: ['t'], summary: 's', response: { 200: Answer } } }, async () => ({ a: 'x' }));
    app.get('/unlisted', { schema: { tags: ['t'], summary: 's', response: { 200: Answer } } }, async (_request, reply) =>
      reply.code(202 as 200).send({ a: 'x' }),
    );
    // A string payload is sent as is (no serialiser), so its body can break the schema.
    app.get('/wrong', { schema: { tags: ['t'], summary: 's', response: { 200: Answer } } }, async (_request, reply) =>
      reply.type('application/json').send('{"a":1}' as unknown as { a: string }),
    );
    try {
      const listed = await app.inject({ method: 'GET', url: '/listed' });
      assert.equal(listed.statusCode, 200);
      assert.deepEqual(listed.json(), { a: 'x' });
      const unlisted = await app.inject({ method: 'GET', url: '/unlisted' });
      assert.equal(unlisted.statusCode, 500);
      assert.deepEqual(
        unlisted.json(),
        statusEnvelope(500, 'Response does not match the API document: GET /unlisted 202: status not in the document'),
      );
      const wrong = await app.inject({ method: 'GET', url: '/wrong' });
      assert.equal(wrong.statusCode, 500);
      assert.deepEqual(
        wrong.json(),
        statusEnvelope(500, 'Response does not match the API document: GET /wrong 200: data/a must be string'),
      );
    } finally {
      await app.close();
    }
  });

  test('the response check is off unless asked for (OPENAPI_RESPONSE_CHECK, false by default)', async () => {
    assert.equal(loadConfig(commonVars(3000), {}).OPENAPI_RESPONSE_CHECK, false);
    assert.equal(loadConfig(commonVars(3000), { OPENAPI_RESPONSE_CHECK: '1' }).OPENAPI_RESPONSE_CHECK, true);
    const app = await buildHttpApp({ title: 'unchecked', logLevel: 'silent', errorBody: statusEnvelope, readiness: async () => {} });
    app.get('/unlisted', { schema: { tags: ['t'], summary: 's', response: { 200: Type.Object({}) } } }, async (_request, reply) =>
      reply.code(202 as 200).send({}),
    );
    try {
      assert.equal((await app.inject({ method: 'GET', url: '/unlisted' })).statusCode, 202);
    } finally {
      await app.close();
    }
  });

  test('shortener: create, stats, visits, QR, redirect, admin, and their errors', async () => {
    const check = async (method: string, path: string, url: string, opts: Parameters<typeof inject>[3] = {}, expected?: number) => {
      const answer = await inject(shortener.app, method, url, opts);
      if (expected !== undefined) assert.equal(answer.status, expected, `${method} ${url}: ${answer.body}`);
      assertDocumented('shortener', method, path, answer);
      return answer;
    };
    const admin = { authorization: `Bearer ${ADMIN_KEY}` };
    const created = await check('POST', '/api/links', '/api/links', { body: { url: 'https://example.com/a', max_visits: 1 } }, 201);
    const code = (JSON.parse(created.body) as { data: { code: string } }).data.code;
    await check('POST', '/api/links', '/api/links', { body: { url: 'https://example.com/b', expires_at: '2099-01-01T00:00:00Z' } }, 201);
    await check('POST', '/api/links', '/api/links', { body: { url: 'not a url' } }, 400);
    await check('POST', '/api/links', '/api/links', { rawBody: '{"url":' }, 400);
    await check('POST', '/api/links', '/api/links', { rawBody: 'url=x', headers: { 'content-type': 'text/plain' } }, 415);
    await check('POST', '/api/links', '/api/links', { rawBody: JSON.stringify({ url: `https://example.com/${'a'.repeat(70_000)}` }) }, 413);
    const ip = uniqueIp();
    for (let i = 0; i < 10; i++) await inject(shortener.app, 'POST', '/api/links', { body: { url: 'https://example.com/c' }, ip });
    await check('POST', '/api/links', '/api/links', { body: { url: 'https://example.com/c' }, ip }, 429);

    await check('GET', '/api/links/{code}', `/api/links/${code}`, {}, 200);
    await check('GET', '/api/links/{code}', '/api/links/nope-nope', {}, 404);
    await check('GET', '/api/links/{code}/visits', `/api/links/${code}/visits`, { headers: admin }, 200);
    await check('GET', '/api/links/{code}/visits', `/api/links/${code}/visits`, {}, 401);
    await check(
      'GET',
      '/api/links/{code}/visits',
      `/api/links/${code}/visits`,
      { headers: { authorization: `Bearer ${'x'.repeat(43)}` } },
      403,
    );
    await check('GET', '/api/links/{code}/visits', `/api/links/${code}/visits?interval=week`, { headers: admin }, 400);
    await check('GET', '/api/links/{code}/visits', '/api/links/zzzzzz/visits', { headers: admin }, 404);
    await check('GET', '/api/links/{code}/qr', `/api/links/${code}/qr`, {}, 200);
    await check('GET', '/api/links/{code}/qr', `/api/links/${code}/qr?size=5`, {}, 400);
    await check('GET', '/api/links/{code}/qr', '/api/links/zzzzzz/qr', {}, 404);

    await check('GET', '/{code}', `/${code}`, {}, 302);
    await check('GET', '/{code}', `/${code}`, {}, 410);
    await check('GET', '/{code}', '/zzzzzz', {}, 404);

    await check('GET', '/api/links', '/api/links?per_page=2', { headers: admin }, 200);
    await check('GET', '/api/links', '/api/links?per_page=0', { headers: admin }, 400);
    await check('GET', '/api/links', '/api/links', {}, 401);
    await check('PATCH', '/api/links/{code}', `/api/links/${code}`, { headers: admin, body: { disabled: true } }, 200);
    await check('PATCH', '/api/links/{code}', `/api/links/${code}`, { headers: admin, body: {} }, 400);
    await check('PATCH', '/api/links/{code}', '/api/links/zzzzzz', { headers: admin, body: { disabled: true } }, 404);
    await check('PATCH', '/api/links/{code}', `/api/links/${code}`, { body: { disabled: true } }, 401);
    await check('DELETE', '/api/links/{code}', `/api/links/${code}`, { headers: admin }, 200);
    await check('DELETE', '/api/links/{code}', `/api/links/${code}`, { headers: admin }, 404);
    await check('DELETE', '/api/links/{code}', `/api/links/${code}`, {}, 401);
    await withShortener({ pool: shortener.pool }, async (unconfigured) => {
      const answer = await inject(unconfigured, 'GET', '/api/links');
      assert.equal(answer.status, 503);
      assertDocumented('shortener', 'GET', '/api/links', answer);
    });
    await check('GET', '/healthz', '/healthz', {}, 200);
    await check('GET', '/readyz', '/readyz', {}, 200);
  });

  test('accounts: register, login, me, admin listing, and their errors', async () => {
    const check = async (method: string, path: string, url: string, opts: Parameters<typeof inject>[3] = {}, expected?: number) => {
      const answer = await inject(accounts.app, method, url, opts);
      if (expected !== undefined) assert.equal(answer.status, expected, `${method} ${url}: ${answer.body}`);
      assertDocumented('accounts', method, path, answer);
      return answer;
    };
    const email = uniqueEmail('openapi');
    const password = 'a long enough password';
    await check('POST', '/auth/register', '/auth/register', { body: { name: 'Ada', email, password } }, 201);
    await check('POST', '/auth/register', '/auth/register', { body: { name: 'Ada', email, password } }, 400);
    await check('POST', '/auth/register', '/auth/register', { body: { name: 'A', email: 'x', password } }, 400);
    await check('POST', '/auth/register', '/auth/register', { rawBody: 'x', headers: { 'content-type': 'text/plain' } }, 415);
    const login = await check('POST', '/auth/login', '/auth/login', { body: { email, password } }, 200);
    await check('POST', '/auth/login', '/auth/login', { body: { email, password: 'wrong password!' } }, 401);
    await check('POST', '/auth/login', '/auth/login', { body: { email } }, 400);
    const token = (JSON.parse(login.body) as { data: { token: string } }).data.token;
    await check('GET', '/auth/me', '/auth/me', { headers: { authorization: `Bearer ${token}` } }, 200);
    await check('GET', '/auth/me', '/auth/me', {}, 401);
    await check('GET', '/admin/users', '/admin/users', { headers: { authorization: `Bearer ${token}` } }, 403);
    await check('GET', '/admin/users', '/admin/users', {}, 401);
    const adminEmail = uniqueEmail('openapi-admin');
    const quiet = { info: () => {}, warn: () => {} };
    await seedAdmin(new UsersRepository(accounts.pool), { ADMIN_EMAIL: adminEmail, ADMIN_PASSWORD: password }, quiet);
    const adminLogin = await inject(accounts.app, 'POST', '/auth/login', { body: { email: adminEmail, password } });
    const adminToken = (JSON.parse(adminLogin.body) as { data: { token: string } }).data.token;
    await check('GET', '/admin/users', '/admin/users?per_page=2', { headers: { authorization: `Bearer ${adminToken}` } }, 200);
    await check('GET', '/admin/users', '/admin/users?page=0', { headers: { authorization: `Bearer ${adminToken}` } }, 400);

    const admin = { authorization: `Bearer ${adminToken}` };
    const user = { authorization: `Bearer ${token}` };
    const me = JSON.parse((await check('GET', '/auth/me', '/auth/me', { headers: user }, 200)).body) as { data: { id: string } };
    const adminId = (decodeJwtPayload(adminToken) as { id: string }).id;
    await check('PATCH', '/admin/users/{id}', `/admin/users/${me.data.id}`, { body: { banned: false } }, 401);
    await check('PATCH', '/admin/users/{id}', `/admin/users/${me.data.id}`, { headers: user, body: { banned: false } }, 403);
    await check('PATCH', '/admin/users/{id}', `/admin/users/${me.data.id}`, { headers: admin, body: {} }, 400);
    await check('PATCH', '/admin/users/{id}', `/admin/users/${randomUUID()}`, { headers: admin, body: { banned: true } }, 404);
    await check('GET', '/admin/audit', '/admin/audit', { headers: user }, 403);
    await check('PATCH', '/admin/users/{id}', `/admin/users/${me.data.id}`, { headers: admin, body: { banned: true } }, 200);
    await check('GET', '/admin/audit', `/admin/audit?user_id=${me.data.id}&per_page=2`, { headers: admin }, 200);
    await check('GET', '/admin/audit', '/admin/audit?event=nope', { headers: admin }, 400);
    await check('GET', '/admin/audit', '/admin/audit', { headers: user }, 401);
    await check('GET', '/admin/audit', '/admin/audit', {}, 401);
    await check('DELETE', '/admin/users/{id}', `/admin/users/${randomUUID()}`, { headers: admin }, 404);
    await check('DELETE', '/admin/users/{id}', `/admin/users/${me.data.id}`, { headers: admin }, 200);
    await accounts.pool.query("UPDATE users SET role = 'user' WHERE role = 'admin' AND id <> $1", [adminId]);
    await check('DELETE', '/admin/users/{id}', `/admin/users/${adminId}`, { headers: admin }, 409);
    await check('POST', '/auth/login', '/auth/login', { body: { email, password } }, 401);
  });

  test('accounts: refresh, sessions, logout, and their errors', async () => {
    const check = async (method: string, path: string, url: string, opts: Parameters<typeof inject>[3] = {}, expected?: number) => {
      const answer = await inject(accounts.app, method, url, opts);
      if (expected !== undefined) assert.equal(answer.status, expected, `${method} ${url}: ${answer.body}`);
      assertDocumented('accounts', method, path, answer);
      return answer;
    };
    const email = uniqueEmail('openapi-sessions');
    const password = 'a long enough password';
    await check('POST', '/auth/register', '/auth/register', { body: { name: 'Ada', email, password } }, 201);
    const login = await check('POST', '/auth/login', '/auth/login', { body: { email, password } }, 200);
    const pair = (JSON.parse(login.body) as { data: { token: string; refresh_token: string } }).data;
    const refreshed = await check('POST', '/auth/refresh', '/auth/refresh', { body: { refresh_token: pair.refresh_token } }, 200);
    const { token, refresh_token: refreshToken } = (JSON.parse(refreshed.body) as { data: { token: string; refresh_token: string } }).data;
    await check('POST', '/auth/refresh', '/auth/refresh', { body: { refresh_token: 'x'.repeat(43) } }, 401);
    await check('POST', '/auth/refresh', '/auth/refresh', { body: {} }, 400);
    const auth = { authorization: `Bearer ${token}` };
    const list = await check('GET', '/auth/sessions', '/auth/sessions', { headers: auth }, 200);
    const sessionId = (JSON.parse(list.body) as { data: Array<{ id: string }> }).data[0]!.id;
    await check('GET', '/auth/sessions', '/auth/sessions', {}, 401);
    await check('DELETE', '/auth/sessions/{id}', `/auth/sessions/${randomUUID()}`, { headers: auth }, 404);
    await check('DELETE', '/auth/sessions/{id}', '/auth/sessions/nope', { headers: auth }, 400);
    await check('DELETE', '/auth/sessions/{id}', `/auth/sessions/${sessionId}`, {}, 401);
    await check('POST', '/auth/logout', '/auth/logout', { headers: auth, body: {} }, 400);
    await check('POST', '/auth/logout', '/auth/logout', { body: { scope: 'global' } }, 401);
    await check('POST', '/auth/logout', '/auth/logout', { headers: auth, body: { refresh_token: refreshToken } }, 200);
    await check('DELETE', '/auth/sessions/{id}', `/auth/sessions/${sessionId}`, { headers: auth }, 404);
    await check('POST', '/auth/logout', '/auth/logout', { headers: auth, body: { scope: 'global' } }, 200);
    const again = JSON.parse((await check('POST', '/auth/login', '/auth/login', { body: { email, password } }, 200)).body) as {
      data: { token: string };
    };
    const fresh = { authorization: `Bearer ${again.data.token}` };
    await check(
      'POST',
      '/auth/password',
      '/auth/password',
      { headers: fresh, body: { current_password: 'wrong password!', new_password: 'x'.repeat(9) } },
      400,
    );
    await check('POST', '/auth/password', '/auth/password', { headers: fresh, body: { current_password: password } }, 400);
    await check('POST', '/auth/password', '/auth/password', { body: { current_password: password, new_password: 'x'.repeat(9) } }, 401);
    await check(
      'POST',
      '/auth/password',
      '/auth/password',
      { headers: fresh, body: { current_password: password, new_password: 'x'.repeat(9) } },
      200,
    );
  });

  test('notes: register, login, notes CRUD, and their errors', async () => {
    const check = async (method: string, path: string, url: string, opts: Parameters<typeof overHttp>[3] = {}, expected?: number) => {
      const answer = await overHttp(notes.url, method, url, opts);
      if (expected !== undefined) assert.equal(answer.status, expected, `${method} ${url}: ${answer.body}`);
      assertDocumented('notes', method, path, answer);
      return answer;
    };
    const email = uniqueEmail('openapi');
    const password = 'correct-horse-battery-staple';
    await check('POST', '/auth/register', '/auth/register', { body: { email, password } }, 201);
    await check('POST', '/auth/register', '/auth/register', { body: { email } }, 400);
    const login = await check('POST', '/auth/login', '/auth/login', { body: { email, password } }, 200);
    await check('POST', '/auth/login', '/auth/login', { body: { email, password: 'wrong-password-here' } }, 401);
    const token = (JSON.parse(login.body) as { access_token: string }).access_token;
    const auth = { authorization: `Bearer ${token}` };
    const created = await check('POST', '/notes', '/notes', { headers: auth, body: { title: 'a note', body: 'text' } }, 201);
    const id = (JSON.parse(created.body) as { id: number }).id;
    await check('POST', '/notes', '/notes', { headers: auth, body: { title: '' } }, 400);
    await check('POST', '/notes', '/notes', { body: { title: 'x' } }, 401);
    await check('GET', '/notes', '/notes', { headers: auth }, 200);
    await check('GET', '/notes', '/notes', { headers: { authorization: 'Bearer not-a-token' } }, 401);
    await check('DELETE', '/notes/{id}', `/notes/${id}`, { headers: auth }, 200);
    await check('DELETE', '/notes/{id}', `/notes/${id}`, { headers: auth }, 404);
    await check('DELETE', '/notes/{id}', '/notes/abc', { headers: auth }, 404);
    await check('DELETE', '/notes/{id}', `/notes/${id}`, {}, 401);
  });

  test('idp: auth, admin and REST routes, and their errors', async () => {
    const check = async (method: string, path: string, url: string, opts: Parameters<typeof overHttp>[3] = {}, expected?: number) => {
      const headers = { apikey: idp.publishableKey, 'x-supabase-api-version': '2024-01-01', ...opts.headers };
      const answer = await overHttp(idp.url, method, url, { ...opts, headers });
      if (expected !== undefined) assert.equal(answer.status, expected, `${method} ${url}: ${answer.body}`);
      assertDocumented('idp', method, path, answer);
      return answer;
    };
    const secret = { apikey: idp.secretKey, authorization: `Bearer ${idp.secretKey}` };
    const email = uniqueEmail('openapi');
    const password = 'correct-horse-1';
    await check('POST', '/auth/v1/signup', '/auth/v1/signup', { body: { email, password } }, 200);
    await check('POST', '/auth/v1/signup', '/auth/v1/signup', { body: { email: 'not an address', password } }, 400);
    await check('POST', '/auth/v1/signup', '/auth/v1/signup', { body: { email }, headers: { apikey: 'wrong' } }, 401);
    const session = await check('POST', '/auth/v1/token', '/auth/v1/token?grant_type=password', { body: { email, password } }, 200);
    await check('POST', '/auth/v1/token', '/auth/v1/token?grant_type=password', { body: { email, password: 'wrong-password-1' } }, 400);
    await check('POST', '/auth/v1/token', '/auth/v1/token?grant_type=nope', { body: {} }, 400);
    const { access_token: token, refresh_token: refresh } = JSON.parse(session.body) as { access_token: string; refresh_token: string };
    await check('POST', '/auth/v1/token', '/auth/v1/token?grant_type=refresh_token', { body: { refresh_token: refresh } }, 200);
    const user = { authorization: `Bearer ${token}` };
    await check('GET', '/auth/v1/user', '/auth/v1/user', { headers: user }, 200);
    await check('GET', '/auth/v1/user', '/auth/v1/user', {}, 403);
    await check('GET', '/auth/v1/.well-known/jwks.json', '/auth/v1/.well-known/jwks.json', {}, 200);

    const made = await check(
      'POST',
      '/auth/v1/admin/users',
      '/auth/v1/admin/users',
      { headers: secret, body: { email: uniqueEmail('made'), password, email_confirm: true } },
      200,
    );
    await check(
      'POST',
      '/auth/v1/admin/users',
      '/auth/v1/admin/users',
      { headers: user, body: { email: uniqueEmail('x'), password } },
      403,
    );
    await check('POST', '/auth/v1/admin/users', '/auth/v1/admin/users', { headers: secret, body: { email, password } }, 422);
    const madeId = (JSON.parse(made.body) as { id: string }).id;
    await check('DELETE', '/auth/v1/admin/users/{id}', `/auth/v1/admin/users/${madeId}`, { headers: secret }, 200);
    await check('DELETE', '/auth/v1/admin/users/{id}', `/auth/v1/admin/users/${randomUUID()}`, { headers: secret }, 404);

    await check(
      'POST',
      '/rest/v1/{table}',
      '/rest/v1/notes',
      { headers: { ...user, prefer: 'return=representation' }, body: { title: 'rest note', body: 'b' } },
      201,
    );
    await check('POST', '/rest/v1/{table}', '/rest/v1/notes', { headers: user, body: { title: 'minimal' } }, 201);
    await check('POST', '/rest/v1/{table}', '/rest/v1/notes', { headers: user, rawBody: '{"title":' }, 400);
    await check('GET', '/rest/v1/{table}', '/rest/v1/notes?select=id,title&order=id.desc&limit=1', { headers: user }, 200);
    await check('GET', '/rest/v1/{table}', '/rest/v1/notes?select=id&limit=1', { headers: { ...user, prefer: 'count=exact' } }, 206);
    await check('GET', '/rest/v1/{table}', '/rest/v1/notes?nope=eq.1', { headers: user }, 400);
    await check('GET', '/rest/v1/{table}', '/rest/v1/no_such_table', { headers: user }, 404);
    await check('GET', '/rest/v1/{table}', '/rest/v1/notes', { headers: { ...user, accept: 'application/vnd.pgrst.object+json' } }, 406);
    await check('GET', '/rest/v1/{table}', '/rest/v1/notes', { headers: { authorization: 'Bearer broken' } }, 401);
    await check('PATCH', '/rest/v1/{table}', '/rest/v1/notes?title=eq.minimal', { headers: user, body: { title: 'changed' } }, 204);
    await check(
      'PATCH',
      '/rest/v1/{table}',
      '/rest/v1/notes?title=eq.changed',
      { headers: { ...user, prefer: 'return=representation' }, body: { body: 'x' } },
      200,
    );
    await check(
      'DELETE',
      '/rest/v1/{table}',
      '/rest/v1/notes?title=eq.changed',
      { headers: { ...user, prefer: 'return=representation' } },
      200,
    );
    await check('DELETE', '/rest/v1/{table}', '/rest/v1/notes?title=eq.rest%20note', { headers: user }, 204);
    await check('POST', '/auth/v1/logout', '/auth/v1/logout', { headers: user }, 204);
  });
});
