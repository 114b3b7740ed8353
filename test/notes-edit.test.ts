// Editing a note (PATCH, updated_at), paging and searching the list, and the session routes
// (refresh, logout), through the notes service on real HTTP against a real idp, in both token
// verification modes.
import assert from 'node:assert/strict';
import { decodeJwt } from 'jose';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { containing, quoted } from '../src/notes/notes-store.js';
import { startIdp, type RunningIdp } from './helpers/idp.js';
import { signUp, startNotes, storedNote, type RunningNotes, type TestUser } from './helpers/notes.js';
import { request } from './helpers/http.js';

let idp: RunningIdp;
before(async () => {
  idp = await startIdp();
});
after(async () => {
  await idp?.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const mode of ['remote', 'local'] as const) {
  describe(`notes editing, paging and sessions (IDP_VERIFY=${mode})`, () => {
    let notes: RunningNotes;
    let alice: TestUser;
    let bob: TestUser;
    before(async () => {
      notes = await startNotes({ idp, env: { IDP_VERIFY: mode } });
      alice = await signUp(notes.url, `edit-alice-${mode}`);
      bob = await signUp(notes.url, `edit-bob-${mode}`);
    });
    after(async () => {
      await notes?.close();
    });

    const create = async (user: TestUser, body: Record<string, unknown>) => {
      const res = await request(notes.url, 'POST', '/notes', { token: user.token, body });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body as { id: number; created_at: string; updated_at: string; title: string; body: string | null };
    };

    describe('PATCH /notes/:id', () => {
      test('changes title and/or body; 200 with every field, updated_at set by the store', async () => {
        const note = await create(alice, { title: 'draft', body: 'one' });
        assert.equal(note.updated_at, note.created_at, 'a new note was last changed when it was made');
        await sleep(5);
        const titled = await request(notes.url, 'PATCH', `/notes/${note.id}`, { token: alice.token, body: { title: 'final' } });
        assert.equal(titled.status, 200);
        assert.deepEqual(Object.keys(titled.body).sort(), ['body', 'created_at', 'id', 'title', 'updated_at', 'user_id']);
        assert.equal(titled.body.title, 'final');
        assert.equal(titled.body.body, 'one');
        assert.equal(titled.body.created_at, note.created_at);
        assert.ok(Date.parse(titled.body.updated_at) > Date.parse(note.updated_at), 'updated_at moved forward');
        const both = await request(notes.url, 'PATCH', `/notes/${note.id}`, { token: alice.token, body: { title: 'again', body: '' } });
        assert.equal(both.status, 200);
        assert.equal(both.body.body, '');
        const stored = await storedNote(idp, note.id);
        assert.equal(stored?.title, 'again');
        assert.equal(stored?.updated_at, both.body.updated_at);
      });

      test('the same rules as create: 400 with the schema message, nothing changed', async () => {
        const note = await create(alice, { title: 'keep' });
        const cases: Array<[unknown, string]> = [
          [{}, 'body must contain at least one of title, body'],
          [{ title: '' }, 'body/title must NOT have fewer than 1 characters'],
          [{ title: 'x'.repeat(201) }, 'body/title must NOT have more than 200 characters'],
          [{ body: 'x'.repeat(10_001) }, 'body/body must NOT have more than 10000 characters'],
          [{ title: 5 }, 'body/title must be string'],
          [{ body: null }, 'body/body must be string'],
        ];
        for (const [body, message] of cases) {
          const res = await request(notes.url, 'PATCH', `/notes/${note.id}`, { token: alice.token, body });
          assert.equal(res.status, 400, JSON.stringify(body));
          assert.deepEqual(res.body, { message }, JSON.stringify(body));
        }
        assert.equal((await storedNote(idp, note.id))?.title, 'keep');
      });

      test('only title and body change: user_id, created_at, updated_at, id in the body are dropped', async () => {
        const note = await create(alice, { title: 'mine' });
        const res = await request(notes.url, 'PATCH', `/notes/${note.id}`, {
          token: alice.token,
          body: { title: 'still mine', user_id: bob.id, created_at: '2000-01-01T00:00:00Z', updated_at: '2000-01-01T00:00:00Z', id: 1 },
        });
        assert.equal(res.status, 200);
        assert.equal(res.body.user_id, alice.id);
        assert.equal(res.body.id, note.id);
        assert.equal(res.body.created_at, note.created_at);
        assert.notEqual(res.body.updated_at, '2000-01-01T00:00:00+00:00');
        // Only the user_id was dropped: a body of nothing else is "no change asked".
        const only = await request(notes.url, 'PATCH', `/notes/${note.id}`, { token: alice.token, body: { user_id: bob.id } });
        assert.equal(only.status, 400);
      });

      test("another user's note and a missing one are the same 404; a malformed id too; nothing changes", async () => {
        const note = await create(alice, { title: 'private' });
        for (const id of [String(note.id), '999999999', '9223372036854775808', 'abc', '-1']) {
          const res = await request(notes.url, 'PATCH', `/notes/${id}`, {
            token: id === String(note.id) ? bob.token : alice.token,
            body: { title: 'taken' },
          });
          assert.equal(res.status, 404, id);
          assert.deepEqual(res.body, { message: 'Note not found' });
        }
        // A malformed id is 404 even with a body that breaks the rules: it could not name a note.
        assert.equal((await request(notes.url, 'PATCH', '/notes/abc', { token: alice.token, body: { title: '' } })).status, 404);
        assert.equal((await storedNote(idp, note.id))?.title, 'private');
      });

      test('needs a bearer token', async () => {
        const res = await request(notes.url, 'PATCH', '/notes/1', { body: { title: 'x' } });
        assert.equal(res.status, 401);
        assert.deepEqual(res.body, { message: 'Missing bearer token' });
      });
    });

    describe('GET /notes: limit, offset, q', () => {
      let carol: TestUser;
      const titles = (res: { body: Array<{ title: string }> }) => res.body.map((n) => n.title);
      before(async () => {
        carol = await signUp(notes.url, `edit-carol-${mode}`);
        // Oldest first, so the list (newest first) is the reverse.
        const made = [
          { title: 'Milk run', body: 'eggs' },
          { title: 'plain', body: 'buy MILK' },
          { title: '100% sure', body: 'a_b' },
          { title: 'commas, (parens)', body: 'and "quotes" \\ backslash' },
          { title: 'star*', body: null },
          { title: 'nothing', body: 'here' },
        ];
        for (const note of made) await create(carol, note.body === null ? { title: note.title } : note);
        await create(alice, { title: 'alice milk' });
      });
      const list = (query: string, user: TestUser = carol) => request(notes.url, 'GET', `/notes${query}`, { token: user.token });

      test('bare: the whole list as before, with X-Total-Count', async () => {
        const res = await list('');
        assert.equal(res.status, 200);
        assert.deepEqual(titles(res), ['nothing', 'star*', 'commas, (parens)', '100% sure', 'plain', 'Milk run']);
        assert.equal(res.headers.get('x-total-count'), '6');
      });

      test('limit and offset page the same order; X-Total-Count is the total', async () => {
        const first = await list('?limit=2');
        assert.deepEqual(titles(first), ['nothing', 'star*']);
        assert.equal(first.headers.get('x-total-count'), '6');
        const second = await list('?limit=2&offset=2');
        assert.deepEqual(titles(second), ['commas, (parens)', '100% sure']);
        const rest = await list('?offset=4');
        assert.deepEqual(titles(rest), ['plain', 'Milk run']);
        const past = await list('?offset=50&limit=5');
        assert.deepEqual(past.body, []);
        assert.equal(past.headers.get('x-total-count'), '6');
      });

      test("q matches title or body ignoring case, only the caller's notes", async () => {
        const milk = await list('?q=milk');
        assert.deepEqual(titles(milk), ['plain', 'Milk run']);
        assert.equal(milk.headers.get('x-total-count'), '2');
        assert.deepEqual(titles(await list('?q=EGGS')), ['Milk run']);
        assert.deepEqual(titles(await list('?q=milk&limit=1&offset=1')), ['Milk run']);
        assert.deepEqual(titles(await list('?q=zebra')), []);
        assert.deepEqual(titles(await list('?q=milk', alice)), ['alice milk']);
        // An empty q is no filter.
        assert.equal((await list('?q=')).headers.get('x-total-count'), '6');
      });

      test('q is literal text: , ( ) " \\ % _ and . are matched as themselves', async () => {
        const q = async (text: string) => titles(await list(`?q=${encodeURIComponent(text)}`));
        assert.deepEqual(await q('%'), ['100% sure']);
        assert.deepEqual(await q('_'), ['100% sure']);
        assert.deepEqual(await q('a_b'), ['100% sure']);
        assert.deepEqual(await q('s, (p'), ['commas, (parens)']);
        assert.deepEqual(await q(')'), ['commas, (parens)']);
        assert.deepEqual(await q('"quotes"'), ['commas, (parens)']);
        assert.deepEqual(await q('\\ back'), ['commas, (parens)']);
        assert.deepEqual(await q('title.eq.nothing'), []);
        assert.deepEqual(await q('x),title.neq.('), []);
        // `*` can only be "any one character" through PostgREST: it finds the star, and `r` + any one.
        assert.deepEqual(await q('star*'), ['star*']);
      });

      test('invalid values are 400 with the parameter named; nothing else is read', async () => {
        const cases: Array<[string, string]> = [
          ['?limit=0', 'querystring/limit must be >= 1'],
          ['?limit=101', 'querystring/limit must be <= 100'],
          ['?limit=abc', 'querystring/limit must be integer'],
          ['?limit=1.5', 'querystring/limit must be integer'],
          ['?offset=-1', 'querystring/offset must be >= 0'],
          ['?offset=1e400', 'querystring/offset must be a finite number'],
          ['?limit=1&limit=2', 'querystring/limit must be integer'],
          [`?q=${'x'.repeat(201)}`, 'querystring/q must NOT have more than 200 characters'],
          ['?q=a%00b', 'querystring/q must not contain U+0000'],
        ];
        for (const [query, message] of cases) {
          const res = await list(query);
          assert.equal(res.status, 400, query);
          assert.deepEqual(res.body, { message }, query);
        }
      });
    });

    describe('sessions', () => {
      test('POST /auth/refresh: a new session; the old refresh token is rotated out', async () => {
        const user = await signUp(notes.url, `refresh-${mode}`);
        const res = await request(notes.url, 'POST', '/auth/refresh', { body: { refresh_token: user.refreshToken } });
        assert.equal(res.status, 200);
        assert.deepEqual(Object.keys(res.body).sort(), ['access_token', 'expires_at', 'refresh_token']);
        assert.notEqual(res.body.refresh_token, user.refreshToken);
        assert.equal(res.body.expires_at, decodeJwt(res.body.access_token).exp);
        assert.equal(decodeJwt(res.body.access_token).sub, user.id);
        const listed = await request(notes.url, 'GET', '/notes', { token: res.body.access_token });
        assert.equal(listed.status, 200);
        const again = await request(notes.url, 'POST', '/auth/refresh', { body: { refresh_token: res.body.refresh_token } });
        assert.equal(again.status, 200);
      });

      test('any refusal is one 401; a missing token is 400', async () => {
        for (const refresh_token of ['not-a-token', 'a'.repeat(500), "'; drop table auth.refresh_tokens; --"]) {
          const res = await request(notes.url, 'POST', '/auth/refresh', { body: { refresh_token } });
          assert.equal(res.status, 401, refresh_token);
          assert.deepEqual(res.body, { message: 'Invalid or expired refresh token' });
        }
        for (const body of [{}, { refresh_token: '' }, { refresh_token: 5 }]) {
          const res = await request(notes.url, 'POST', '/auth/refresh', { body });
          assert.equal(res.status, 400);
          assert.deepEqual(res.body, { message: 'refresh_token is required' });
        }
      });

      test('POST /auth/logout ends the session: its refresh token stops working, other sessions do not', async () => {
        const user = await signUp(notes.url, `logout-${mode}`);
        const other = await request(notes.url, 'POST', '/auth/login', {
          body: { email: user.email, password: 'correct-horse-battery-staple' },
        });
        assert.equal(other.status, 200);
        const res = await request(notes.url, 'POST', '/auth/logout', { token: user.token });
        assert.equal(res.status, 204);
        assert.equal(res.body, undefined);
        const refused = await request(notes.url, 'POST', '/auth/refresh', { body: { refresh_token: user.refreshToken } });
        assert.equal(refused.status, 401);
        const list = await request(notes.url, 'GET', '/notes', { token: user.token });
        // remote asks the provider, which knows the session is gone; local trusts the signature until exp.
        assert.equal(list.status, mode === 'remote' ? 401 : 200);
        assert.equal((await request(notes.url, 'GET', '/notes', { token: other.body.access_token })).status, 200);
        assert.equal(
          (await request(notes.url, 'POST', '/auth/refresh', { body: { refresh_token: other.body.refresh_token } })).status,
          200,
        );
      });

      test('POST /auth/logout needs a bearer token', async () => {
        const res = await request(notes.url, 'POST', '/auth/logout');
        assert.equal(res.status, 401);
        assert.deepEqual(res.body, { message: 'Missing bearer token' });
      });
    });
  });
}

describe("the store's search value", () => {
  test('LIKE specials escaped, * as any one character, quoted for or=()', () => {
    assert.equal(containing('a%b_c\\d'), '*a\\%b\\_c\\\\d*');
    assert.equal(containing('x*y'), '*x_y*');
    assert.equal(quoted('a,"b"\\c'), '"a,\\"b\\"\\\\c"');
  });

  test('the migration keeps updated_at out of reach of a signed-in user', async () => {
    const db = new pg.Client({ connectionString: idp.databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query(
        `select column_name, privilege_type from information_schema.column_privileges
         where table_schema = 'public' and table_name = 'notes' and grantee = 'authenticated' and privilege_type in ('INSERT', 'UPDATE')
         order by 1, 2`,
      );
      assert.deepEqual(rows, [
        { column_name: 'body', privilege_type: 'INSERT' },
        { column_name: 'body', privilege_type: 'UPDATE' },
        { column_name: 'title', privilege_type: 'INSERT' },
        { column_name: 'title', privilege_type: 'UPDATE' },
      ]);
    } finally {
      await db.end();
    }
  });
});
