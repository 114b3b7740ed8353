// The whole flow and every rule of the notes endpoints, through the notes
// service on real HTTP, against a real idp (real PostgreSQL, RLS, supabase-js),
// in both token verification modes.
import assert from 'node:assert/strict';
import { decodeJwt } from 'jose';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startIdp, type RunningIdp } from './helpers/idp.js';
import { PASSWORD, recordingFetch, signUp, startNotes, type RunningNotes } from './helpers/notes.js';
import { uniqueEmail } from './helpers/emails.js';
import { request } from './helpers/http.js';

let idp: RunningIdp;
before(async () => {
  idp = await startIdp();
});
after(async () => {
  await idp?.close();
});

const NOTE_KEYS = ['body', 'created_at', 'id', 'title', 'updated_at', 'user_id'];

for (const mode of ['remote', 'local'] as const) {
  describe(`notes flow (IDP_VERIFY=${mode})`, () => {
    let notes: RunningNotes;
    before(async () => {
      notes = await startNotes({ idp, env: { IDP_VERIFY: mode } });
    });
    after(async () => {
      await notes?.close();
    });

    test('register, login, create, list, delete', async () => {
      const email = uniqueEmail('flow');
      const registered = await request(notes.url, 'POST', '/auth/register', { body: { email, password: PASSWORD } });
      assert.equal(registered.status, 201);
      assert.deepEqual(Object.keys(registered.body).sort(), ['email', 'id']);
      assert.equal(registered.body.email, email);
      assert.match(registered.body.id, /^[0-9a-f-]{36}$/);

      const login = await request(notes.url, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
      assert.equal(login.status, 200);
      assert.deepEqual(Object.keys(login.body).sort(), ['access_token', 'expires_at', 'refresh_token']);
      const token: string = login.body.access_token;
      const refreshToken: string = login.body.refresh_token;
      const expiresAt: number = login.body.expires_at;
      assert.equal(typeof refreshToken, 'string');
      assert.ok(refreshToken.length > 0);
      // expires_at is Unix seconds, exactly the token's exp.
      assert.ok(Number.isInteger(expiresAt));
      assert.equal(expiresAt, decodeJwt(token).exp);
      const nowSeconds = Math.floor(Date.now() / 1000);
      assert.ok(expiresAt > nowSeconds && expiresAt <= nowSeconds + 3600 + 5, `expires_at ${expiresAt} is not seconds from now`);
      assert.equal(decodeJwt(token).sub, registered.body.id);

      const created = await request(notes.url, 'POST', '/notes', { token, body: { title: 'Groceries', body: 'milk, eggs' } });
      assert.equal(created.status, 201);
      assert.deepEqual(Object.keys(created.body).sort(), NOTE_KEYS);
      assert.equal(created.body.title, 'Groceries');
      assert.equal(created.body.body, 'milk, eggs');
      assert.equal(created.body.user_id, registered.body.id);
      assert.ok(Number.isInteger(created.body.id));
      assert.ok(Math.abs(Date.parse(created.body.created_at) - Date.now()) < 60_000);

      const second = await request(notes.url, 'POST', '/notes', { token, body: { title: 'Second' } });
      assert.equal(second.status, 201);

      const listed = await request(notes.url, 'GET', '/notes', { token });
      assert.equal(listed.status, 200);
      assert.deepEqual(listed.body, [second.body, created.body]);

      const deleted = await request(notes.url, 'DELETE', `/notes/${created.body.id}`, { token });
      assert.equal(deleted.status, 200);
      assert.deepEqual(deleted.body, { message: 'Note deleted' });

      const after = await request(notes.url, 'GET', '/notes', { token });
      assert.deepEqual(after.body, [second.body]);
      const again = await request(notes.url, 'DELETE', `/notes/${created.body.id}`, { token });
      assert.equal(again.status, 404);
      assert.deepEqual(again.body, { message: 'Note not found' });
    });
  });
}

describe('register', () => {
  let notes: RunningNotes;
  before(async () => {
    notes = await startNotes({ idp });
  });
  after(async () => {
    await notes?.close();
  });

  test('a missing, empty or non-string email or password is 400 "email and password are required"', async () => {
    const bodies: unknown[] = [
      { password: PASSWORD },
      { email: uniqueEmail() },
      {},
      { email: '', password: PASSWORD },
      { email: uniqueEmail(), password: '' },
      { email: 42, password: PASSWORD },
      [],
    ];
    for (const body of bodies) {
      const res = await request(notes.url, 'POST', '/auth/register', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(res.body, { message: 'email and password are required' }, JSON.stringify(body));
    }
    const noBody = await fetch(`${notes.url}/auth/register`, { method: 'POST' });
    assert.equal(noBody.status, 400);
    assert.deepEqual(await noBody.json(), { message: 'email and password are required' });
  });

  test("the idp's rejections are 400 with the idp's message", async () => {
    const email = uniqueEmail('dup');
    assert.equal((await request(notes.url, 'POST', '/auth/register', { body: { email, password: PASSWORD } })).status, 201);
    const cases: Array<[unknown, RegExp]> = [
      [{ email, password: PASSWORD }, /already registered/i],
      [{ email: email.toUpperCase(), password: PASSWORD }, /already registered/i],
      [{ email: uniqueEmail(), password: 'abc' }, /at least 6 characters/i],
      [{ email: 'not-an-email', password: PASSWORD }, /email/i],
      [{ email: uniqueEmail(), password: 'x'.repeat(73) }, /72 characters/i],
    ];
    for (const [body, message] of cases) {
      const res = await request(notes.url, 'POST', '/auth/register', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(Object.keys(res.body), ['message']);
      assert.match(res.body.message, message);
    }
  });

  test('with email confirmation on, register is still 201 {id, email} and login is refused until confirmed', async () => {
    const confirmingIdp = await startIdp({ env: { IDP_AUTOCONFIRM: 'false' } });
    const confirmingNotes = await startNotes({ idp: confirmingIdp });
    try {
      const email = uniqueEmail('unconfirmed');
      const registered = await request(confirmingNotes.url, 'POST', '/auth/register', { body: { email, password: PASSWORD } });
      assert.equal(registered.status, 201);
      assert.deepEqual(Object.keys(registered.body).sort(), ['email', 'id']);
      assert.equal(registered.body.email, email);
      const login = await request(confirmingNotes.url, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
      assert.equal(login.status, 401);
      assert.deepEqual(login.body, { message: 'Invalid email or password' });
    } finally {
      await confirmingNotes.close();
      await confirmingIdp.close();
    }
  });
});

describe('login', () => {
  let notes: RunningNotes;
  before(async () => {
    notes = await startNotes({ idp });
  });
  after(async () => {
    await notes?.close();
  });

  test('an unknown email and a wrong password get the same 401 "Invalid email or password"', async () => {
    const user = await signUp(notes.url, 'login');
    const wrongPassword = await request(notes.url, 'POST', '/auth/login', { body: { email: user.email, password: 'wrong-password' } });
    const unknownEmail = await request(notes.url, 'POST', '/auth/login', { body: { email: uniqueEmail('nobody'), password: PASSWORD } });
    for (const res of [wrongPassword, unknownEmail]) {
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, { message: 'Invalid email or password' });
    }
  });

  test('email is case-insensitive at the idp; every login is a fresh session', async () => {
    const user = await signUp(notes.url, 'case');
    const a = await request(notes.url, 'POST', '/auth/login', { body: { email: user.email.toUpperCase(), password: PASSWORD } });
    const b = await request(notes.url, 'POST', '/auth/login', { body: { email: user.email, password: PASSWORD } });
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    assert.notEqual(a.body.refresh_token, b.body.refresh_token);
    assert.equal(decodeJwt(a.body.access_token).sub, user.id);
  });

  test('a missing email or password is 400 "email and password are required" (never reaches the idp)', async () => {
    const recorder = recordingFetch();
    const counted = await startNotes({ idp, deps: { fetch: recorder.fetch } });
    try {
      for (const body of [{ email: uniqueEmail() }, { password: PASSWORD }, {}]) {
        const res = await request(counted.url, 'POST', '/auth/login', { body });
        assert.equal(res.status, 400);
        assert.deepEqual(res.body, { message: 'email and password are required' });
      }
      assert.deepEqual(recorder.seen, []);
    } finally {
      await counted.close();
    }
  });
});

describe('notes endpoints', () => {
  let notes: RunningNotes;
  const recorder = recordingFetch();
  before(async () => {
    notes = await startNotes({ idp, deps: { fetch: recorder.fetch } });
  });
  after(async () => {
    await notes?.close();
  });

  test('POST /notes: title is required, 1..200 characters; body optional, at most 10000; schema errors are 400 {message}', async () => {
    const { token } = await signUp(notes.url, 'limits');
    const rejected: Array<[unknown, RegExp]> = [
      [{}, /title/],
      [{ body: 'no title' }, /title/],
      [{ title: '' }, /title/],
      [{ title: 'x'.repeat(201) }, /title/],
      [{ title: 42 }, /title/],
      [{ title: null }, /title/],
      [{ title: 'ok', body: 'x'.repeat(10_001) }, /body/],
      [{ title: 'ok', body: 7 }, /body/],
      ['a string', /body/],
    ];
    for (const [body, message] of rejected) {
      const res = await request(notes.url, 'POST', '/notes', { token, body });
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      assert.deepEqual(Object.keys(res.body), ['message']);
      assert.match(res.body.message, message);
    }
    const invalidJson = await fetch(`${notes.url}/notes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"title":',
    });
    assert.equal(invalidJson.status, 400);
    assert.deepEqual(Object.keys((await invalidJson.json()) as object), ['message']);

    // The limits themselves are accepted, counted in characters, not bytes.
    const longest = await request(notes.url, 'POST', '/notes', { token, body: { title: 'é'.repeat(200), body: '😀'.repeat(10_000) } });
    assert.equal(longest.status, 201);
    assert.equal(longest.body.title, 'é'.repeat(200));
    assert.equal(longest.body.body, '😀'.repeat(10_000));
  });

  test('POST /notes ignores user_id and any other field; a missing body is null', async () => {
    const owner = await signUp(notes.url, 'owner');
    const other = await signUp(notes.url, 'other');
    const res = await request(notes.url, 'POST', '/notes', {
      token: owner.token,
      body: { title: 'mine', user_id: other.id, id: 123456, created_at: '2000-01-01T00:00:00Z', extra: true },
    });
    assert.equal(res.status, 201);
    assert.deepEqual(Object.keys(res.body).sort(), NOTE_KEYS);
    assert.equal(res.body.user_id, owner.id);
    assert.equal(res.body.body, null);
    assert.notEqual(res.body.id, 123456);
    assert.notEqual(res.body.created_at.slice(0, 4), '2000');
  });

  test('GET /notes: only the caller’s notes, newest first, id breaking ties in created_at', async () => {
    const user = await signUp(notes.url, 'order');
    const stranger = await signUp(notes.url, 'stranger');
    await request(notes.url, 'POST', '/notes', { token: stranger.token, body: { title: 'not yours' } });
    assert.deepEqual((await request(notes.url, 'GET', '/notes', { token: user.token })).body, []);

    // Three notes with one timestamp and one older, written straight into the database.
    const db = new pg.Client({ connectionString: idp.databaseUrl });
    await db.connect();
    try {
      await db.query(
        `INSERT INTO public.notes (user_id, title, created_at) VALUES
           ($1, 'tie-1', '2026-03-01T10:00:00Z'), ($1, 'tie-2', '2026-03-01T10:00:00Z'),
           ($1, 'older', '2026-02-01T10:00:00Z'), ($1, 'tie-3', '2026-03-01T10:00:00Z')`,
        [user.id],
      );
    } finally {
      await db.end();
    }
    const newest = await request(notes.url, 'POST', '/notes', { token: user.token, body: { title: 'newest' } });
    const listed = await request(notes.url, 'GET', '/notes', { token: user.token });
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.map((n: { title: string }) => n.title),
      ['newest', 'tie-3', 'tie-2', 'tie-1', 'older'],
    );
    assert.deepEqual(listed.body[0], newest.body);
    for (const note of listed.body) {
      assert.deepEqual(Object.keys(note).sort(), NOTE_KEYS);
      assert.equal(note.user_id, user.id);
    }
  });

  test('DELETE /notes/:id of a missing note is 404 "Note not found"', async () => {
    const { token } = await signUp(notes.url, 'missing');
    for (const id of ['0', '999999999', '9223372036854775807']) {
      const res = await request(notes.url, 'DELETE', `/notes/${id}`, { token });
      assert.equal(res.status, 404, id);
      assert.deepEqual(res.body, { message: 'Note not found' });
    }
  });

  test('DELETE /notes/:id with a malformed id is 404 without asking the store', async () => {
    const { token } = await signUp(notes.url, 'malformed');
    const kept = await request(notes.url, 'POST', '/notes', { token, body: { title: 'kept' } });
    for (const id of ['abc', '-1', '1.5', '1e3', '0x10', '%20', '9223372036854775808', '99999999999999999999', `${kept.body.id},1`]) {
      recorder.seen.length = 0;
      const res = await request(notes.url, 'DELETE', `/notes/${id}`, { token });
      assert.equal(res.status, 404, id);
      assert.deepEqual(res.body, { message: 'Note not found' });
      assert.deepEqual(
        recorder.seen.filter((r) => r.includes('/rest/')),
        [],
        `id ${id} reached the store`,
      );
    }
    // Leading zeros still name the note.
    const res = await request(notes.url, 'DELETE', `/notes/00${kept.body.id}`, { token });
    assert.equal(res.status, 200);
  });

  test('store failures: insert is 400, list and delete are 500, each with the store’s message', async () => {
    const user = await signUp(notes.url, 'storefail');
    const note = await request(notes.url, 'POST', '/notes', { token: user.token, body: { title: 'still here' } });
    // PostgreSQL refuses NUL in text: the idp answers with the database's error.
    const nul = await request(notes.url, 'POST', '/notes', { token: user.token, body: { title: 'a\u0000b' } });
    assert.equal(nul.status, 400);
    assert.deepEqual(Object.keys(nul.body), ['message']);
    assert.match(nul.body.message, /0x00|\\u0000|null character|unsupported Unicode/i);

    // Take the table away from the authenticated role: every call now fails in the store.
    const db = new pg.Client({ connectionString: idp.databaseUrl });
    await db.connect();
    try {
      await db.query('REVOKE ALL ON public.notes FROM authenticated');
      const list = await request(notes.url, 'GET', '/notes', { token: user.token });
      assert.equal(list.status, 500);
      assert.deepEqual(list.body, { message: 'permission denied for table notes' });
      const create = await request(notes.url, 'POST', '/notes', { token: user.token, body: { title: 'x' } });
      assert.equal(create.status, 400);
      assert.deepEqual(create.body, { message: 'permission denied for table notes' });
      const remove = await request(notes.url, 'DELETE', `/notes/${note.body.id}`, { token: user.token });
      assert.equal(remove.status, 500);
      assert.deepEqual(remove.body, { message: 'permission denied for table notes' });
      const logged = notes.logs.lines().filter((l) => l.msg === 'note store error');
      assert.ok(logged.length >= 2);
      assert.equal((logged.at(-1)!.store as { code: string }).code, '42501');
    } finally {
      await db.query('GRANT SELECT, INSERT, UPDATE, DELETE ON public.notes TO authenticated');
      await db.end();
    }
    assert.equal((await request(notes.url, 'GET', '/notes', { token: user.token })).status, 200);
  });

  test('errors everywhere have exactly {message}: unknown routes, wrong methods, docs are served', async () => {
    const unknown = await request(notes.url, 'GET', '/nope');
    assert.equal(unknown.status, 404);
    assert.deepEqual(Object.keys(unknown.body), ['message']);
    const put = await request(notes.url, 'PUT', '/notes/1', { body: { title: 'x' } });
    assert.equal(put.status, 404);
    assert.deepEqual(Object.keys(put.body), ['message']);
    const docs = await request(notes.url, 'GET', '/docs/json');
    assert.equal(docs.status, 200);
    assert.ok(docs.body.paths['/notes/{id}']);
    assert.ok(docs.body.paths['/auth/register']);
  });
});
