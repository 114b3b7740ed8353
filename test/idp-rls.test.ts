// Row-level security is enforced by PostgreSQL for every REST request: one data table of
// (caller, operation, owner) cases driven by one test, against the REST API with two users' tokens,
// anon and service_role. Plus: the login role behind REST cannot get around it, and several
// instances on one database agree on that role without coordination.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { authenticatorPassword, authenticatorRoleName, authenticatorUrl } from '../src/idp/authenticator.js';
import { createUser, startIdp, sharedIdp } from './helpers/idp.js';
import { idpRequest, type JsonReply } from './helpers/http.js';

let alice: Awaited<ReturnType<typeof createUser>>;
let bob: Awaited<ReturnType<typeof createUser>>;

const ctx = sharedIdp({}, async () => {
  alice = await createUser(ctx.idp, 'alice@example.com');
  bob = await createUser(ctx.idp, 'bob@example.com');
});

type Caller = 'alice' | 'bob' | 'anon' | 'service';
type Owner = 'alice' | 'bob';

interface Case {
  caller: Caller;
  op: 'select' | 'insert' | 'update' | 'delete';
  /** Whose note the request targets (select: whose notes exist; insert: the user_id sent, if any). */
  owner: Owner | 'none';
  status: number;
  code?: string;
  /** select: the owners of the rows returned; update/delete: rows affected as seen by the caller. */
  rows?: Owner[] | number;
  /** Whether alice's / bob's note still has its original title afterwards (update/delete). */
  untouched?: boolean;
}

const CASES: Case[] = [
  // Rule 1: a user reads only own rows; anon has no grant at all; service_role sees everything.
  { caller: 'alice', op: 'select', owner: 'none', status: 200, rows: ['alice'] },
  { caller: 'bob', op: 'select', owner: 'none', status: 200, rows: ['bob'] },
  { caller: 'alice', op: 'select', owner: 'bob', status: 200, rows: [] },
  { caller: 'anon', op: 'select', owner: 'none', status: 401, code: '42501' },
  { caller: 'service', op: 'select', owner: 'none', status: 200, rows: ['alice', 'bob'] },
  // Rule 2: the owner is always the caller (the column default); a user may not name user_id at
  // all, not even their own (no INSERT grant on the column), and RLS would refuse someone else's.
  { caller: 'alice', op: 'insert', owner: 'none', status: 201, rows: ['alice'] },
  { caller: 'alice', op: 'insert', owner: 'alice', status: 403, code: '42501' },
  { caller: 'alice', op: 'insert', owner: 'bob', status: 403, code: '42501' },
  { caller: 'bob', op: 'insert', owner: 'alice', status: 403, code: '42501' },
  { caller: 'anon', op: 'insert', owner: 'none', status: 401, code: '42501' },
  { caller: 'anon', op: 'insert', owner: 'alice', status: 401, code: '42501' },
  { caller: 'service', op: 'insert', owner: 'bob', status: 201, rows: ['bob'] },
  // service_role has no auth.uid(): the NOT NULL default fails unless user_id is sent.
  { caller: 'service', op: 'insert', owner: 'none', status: 400, code: '23502' },
  // Rule 3: updates and deletes skip rows the caller does not own, without an error.
  { caller: 'alice', op: 'update', owner: 'alice', status: 200, rows: 1, untouched: false },
  { caller: 'alice', op: 'update', owner: 'bob', status: 200, rows: 0, untouched: true },
  { caller: 'bob', op: 'update', owner: 'alice', status: 200, rows: 0, untouched: true },
  { caller: 'anon', op: 'update', owner: 'alice', status: 401, code: '42501', untouched: true },
  { caller: 'service', op: 'update', owner: 'bob', status: 200, rows: 1, untouched: false },
  { caller: 'alice', op: 'delete', owner: 'alice', status: 200, rows: 1, untouched: false },
  { caller: 'alice', op: 'delete', owner: 'bob', status: 200, rows: 0, untouched: true },
  { caller: 'bob', op: 'delete', owner: 'alice', status: 200, rows: 0, untouched: true },
  { caller: 'anon', op: 'delete', owner: 'bob', status: 401, code: '42501', untouched: true },
  { caller: 'service', op: 'delete', owner: 'alice', status: 200, rows: 1, untouched: false },
];

test('RLS matrix: caller × operation × owner', async () => {
  const userId = (o: Owner) => (o === 'alice' ? alice.id : bob.id);
  const ownerOf = (id: string): Owner => (id === alice.id ? 'alice' : 'bob');
  for (const c of CASES) {
    const label = `${c.caller} ${c.op} ${c.owner}`;
    await ctx.db.query('TRUNCATE public.notes');
    const seeded = await ctx.db.query<{ id: number; user_id: string }>(
      `INSERT INTO public.notes (user_id, title) VALUES ($1, 'original'), ($2, 'original') RETURNING id, user_id`,
      [alice.id, bob.id],
    );
    const noteOf = (o: Owner) => seeded.rows.find((r) => r.user_id === userId(o))!.id;
    const auth =
      c.caller === 'service'
        ? { apikey: ctx.idp.secretKey }
        : c.caller === 'anon'
          ? {}
          : { token: c.caller === 'alice' ? alice.token : bob.token };
    const rep = { prefer: 'return=representation' };

    let res: JsonReply;
    if (c.op === 'select') {
      const filter = c.owner === 'none' ? '' : `&user_id=eq.${userId(c.owner)}`;
      res = await idpRequest(ctx.idp, 'GET', `/rest/v1/notes?select=*&order=user_id${filter}`, auth);
    } else if (c.op === 'insert') {
      const body = c.owner === 'none' ? { title: 'new' } : { title: 'new', user_id: userId(c.owner) };
      res = await idpRequest(ctx.idp, 'POST', '/rest/v1/notes?select=*', { ...auth, headers: rep, body });
    } else if (c.op === 'update') {
      res = await idpRequest(ctx.idp, 'PATCH', `/rest/v1/notes?id=eq.${noteOf(c.owner as Owner)}`, {
        ...auth,
        headers: rep,
        body: { title: 'changed' },
      });
    } else {
      res = await idpRequest(ctx.idp, 'DELETE', `/rest/v1/notes?id=eq.${noteOf(c.owner as Owner)}`, { ...auth, headers: rep });
    }

    assert.equal(res.status, c.status, `${label}: ${res.text}`);
    if (c.code) assert.equal((res.body as { code: string }).code, c.code, label);
    if (Array.isArray(c.rows)) {
      const owners = (res.body as Array<{ user_id: string }>).map((r) => ownerOf(r.user_id)).sort();
      assert.deepEqual(owners, c.rows, label);
    } else if (typeof c.rows === 'number') {
      assert.equal((res.body as unknown[]).length, c.rows, label);
    }
    if (c.untouched !== undefined && c.owner !== 'none') {
      const after = await ctx.db.query('SELECT title FROM public.notes WHERE id = $1', [noteOf(c.owner)]);
      const unchanged = after.rowCount === 1 && after.rows[0].title === 'original';
      assert.equal(unchanged, c.untouched, `${label}: target note ${c.untouched ? 'must' : 'must not'} be untouched`);
    }
    if (c.op === 'insert' && c.status !== 201) {
      assert.equal((await ctx.db.query('SELECT 1 FROM public.notes')).rowCount, 2, `${label}: nothing inserted`);
    }
  }
});

test('a note cannot be handed to another user, and RLS hides rows from the returned representation', async () => {
  await ctx.db.query('TRUNCATE public.notes');
  const { rows } = await ctx.db.query(`INSERT INTO public.notes (user_id, title) VALUES ($1, 'mine') RETURNING id`, [alice.id]);
  const res = await idpRequest(ctx.idp, 'PATCH', `/rest/v1/notes?id=eq.${rows[0].id}`, { token: alice.token, body: { user_id: bob.id } });
  assert.equal(res.status, 403);
  // Refused by the column grant before RLS is asked: user_id is not a column users may update.
  assert.deepEqual(res.body, { code: '42501', details: null, hint: null, message: 'permission denied for table notes' });
  assert.equal((await ctx.db.query('SELECT user_id FROM public.notes WHERE id = $1', [rows[0].id])).rows[0].user_id, alice.id);
});

test('each request runs with its own claims: auth.uid() and the request settings are per transaction', async () => {
  await ctx.db.query(`
    CREATE OR REPLACE VIEW public.whoami WITH (security_invoker = true) AS
      SELECT auth.uid() AS uid, auth.role() AS role, current_user::text AS db_role,
             current_setting('request.method', true) AS method, current_setting('request.path', true) AS path;
    GRANT SELECT ON public.whoami TO anon, authenticated, service_role;`);
  const asAlice = await idpRequest(ctx.idp, 'GET', '/rest/v1/whoami', { token: alice.token });
  assert.deepEqual(asAlice.body, [{ uid: alice.id, role: 'authenticated', db_role: 'authenticated', method: 'GET', path: '/whoami' }]);
  const asAnon = await idpRequest(ctx.idp, 'GET', '/rest/v1/whoami');
  assert.deepEqual(asAnon.body, [{ uid: null, role: 'anon', db_role: 'anon', method: 'GET', path: '/whoami' }]);
  const asService = await idpRequest(ctx.idp, 'GET', '/rest/v1/whoami', { apikey: ctx.idp.secretKey });
  assert.deepEqual(asService.body, [{ uid: null, role: 'service_role', db_role: 'service_role', method: 'GET', path: '/whoami' }]);
  // Many requests alternating callers on a small pool never see each other's identity.
  const results = await Promise.all(
    Array.from({ length: 30 }, (_, i) =>
      i % 2 === 0 ? idpRequest(ctx.idp, 'GET', '/rest/v1/whoami', { token: bob.token }) : idpRequest(ctx.idp, 'GET', '/rest/v1/whoami'),
    ),
  );
  for (const [i, r] of results.entries()) assert.equal((r.body as Array<{ uid: string | null }>)[0]!.uid, i % 2 === 0 ? bob.id : null);
});

test('the authenticator login role cannot bypass anything by itself', async () => {
  const dbName = new URL(ctx.idp.databaseUrl).pathname.slice(1);
  const role = authenticatorRoleName(dbName);
  const client = new pg.Client({
    connectionString: authenticatorUrl(ctx.idp.databaseUrl, role, authenticatorPassword(ctx.idp.secretKey, role)),
  });
  await client.connect();
  try {
    const attributes = await client.query(
      'SELECT rolinherit, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user',
    );
    assert.deepEqual(attributes.rows[0], {
      rolinherit: false,
      rolsuper: false,
      rolbypassrls: false,
      rolcreaterole: false,
      rolcreatedb: false,
    });
    const denied = async (sql: string) => {
      await assert.rejects(client.query(sql), (err: { code?: string }) => err.code === '42501', sql);
    };
    await denied('SELECT * FROM auth.users');
    await denied('SELECT * FROM auth.refresh_tokens');
    await denied('SELECT * FROM public.notes');
    await denied('SET ROLE postgres');
    await denied(`SELECT set_config('role', 'postgres', false)`);
    await denied('CREATE TABLE public.sneaky (id int)');
    // What it may do is exactly what PostgREST's authenticator does: become an API role.
    await client.query('BEGIN');
    await client.query(`SELECT set_config('role', 'authenticated', true)`);
    const asAuthenticated = await client.query('SELECT count(*)::int AS n FROM public.notes');
    assert.equal(asAuthenticated.rows[0].n, 0, 'no claims: RLS shows nothing');
    await assert.rejects(client.query('SELECT * FROM auth.users'), (err: { code?: string }) => err.code === '42501');
    await client.query('ROLLBACK');
  } finally {
    await client.end();
  }
  // The embedded server checks passwords (scram-sha-256): a wrong one does not get in. (The machine's
  // server in CI trusts local connections, so there the role's attributes above are the defence.)
  if (process.env.DATABASE_URL === undefined) {
    const wrong = new pg.Client({ connectionString: authenticatorUrl(ctx.idp.databaseUrl, role, 'not-the-password') });
    await assert.rejects(wrong.connect(), (err: { code?: string }) => err.code === '28P01');
    await wrong.end().catch(() => {});
  }
});

test("a second instance on the same database shares the login role and accepts the first one's tokens", async () => {
  const other = await startIdp({ databaseUrl: ctx.idp.databaseUrl });
  try {
    const mine = await idpRequest(other, 'GET', '/rest/v1/notes?select=user_id', { token: alice.token });
    assert.equal(mine.status, 200);
    const user = await idpRequest(other, 'GET', '/auth/v1/user', { token: alice.token });
    assert.equal(user.status, 200);
    // The first instance's pool still connects (the password it reset is the same one).
    const first = await idpRequest(ctx.idp, 'GET', '/rest/v1/notes?select=user_id', { token: bob.token });
    assert.equal(first.status, 200);
  } finally {
    await other.close();
  }
});
