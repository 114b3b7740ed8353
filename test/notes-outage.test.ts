// The idp unreachable, failing, slow, or refusing this service's keys: register,
// login and every notes route answer 503 {message} (never 400/401, which would
// sign users out), the cause is logged, and the service recovers by itself.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startIdp, type RunningIdp } from './helpers/idp.js';
import { PASSWORD, signUp, startNotes, startUpstream, type RunningNotes } from './helpers/notes.js';
import { uniqueEmail } from './helpers/emails.js';
import { request, type JsonReply } from './helpers/http.js';
import { closedPort, forwardPort } from './helpers/ports.js';

const UNAVAILABLE = { message: 'Identity provider unavailable, try again shortly' };

let idp: RunningIdp;
let direct: RunningNotes;
before(async () => {
  idp = await startIdp();
  direct = await startNotes({ idp });
});
after(async () => {
  await direct?.close();
  await idp?.close();
});

/** register, login, and the three notes routes with a token that is valid at the real idp. */
async function everyRoute(url: string, token: string, noteId: number): Promise<Array<[string, JsonReply]>> {
  return [
    ['register', await request(url, 'POST', '/auth/register', { body: { email: uniqueEmail('outage'), password: PASSWORD } })],
    ['login', await request(url, 'POST', '/auth/login', { body: { email: uniqueEmail('outage'), password: PASSWORD } })],
    ['list', await request(url, 'GET', '/notes', { token })],
    ['create', await request(url, 'POST', '/notes', { token, body: { title: 'during outage' } })],
    ['delete', await request(url, 'DELETE', `/notes/${noteId}`, { token })],
  ];
}

function assertAllUnavailable(replies: Array<[string, JsonReply]>) {
  for (const [name, res] of replies) {
    assert.equal(res.status, 503, `${name}: ${JSON.stringify(res.body)}`);
    assert.deepEqual(res.body, UNAVAILABLE, name);
    assert.equal(res.headers.get('retry-after'), '1', name);
  }
}

for (const mode of ['remote', 'local'] as const) {
  describe(`idp unreachable (IDP_VERIFY=${mode})`, () => {
    test('every route answers 503 {message}, it is logged, readiness fails; all recover once the idp is reachable', async () => {
      const user = await signUp(direct.url, 'outage');
      const note = await request(direct.url, 'POST', '/notes', { token: user.token, body: { title: 'survives' } });
      const port = await closedPort();
      const notes = await startNotes({ idp: { ...idp, url: `http://127.0.0.1:${port}` }, env: { IDP_VERIFY: mode } });
      try {
        assertAllUnavailable(await everyRoute(notes.url, user.token, note.body.id));
        const warnings = notes.logs.lines().filter((l) => l.msg === 'identity provider unavailable');
        assert.ok(warnings.length >= 5, `expected a warning per request, got ${warnings.length}`);
        assert.match(String(warnings[0]!.reason), /status 0/);
        // Nothing sensitive in what was logged.
        assert.doesNotMatch(notes.logs.text(), new RegExp(user.token.split('.')[2]!));
        assert.equal((await request(notes.url, 'GET', '/readyz')).status, 503);

        // The same port now leads to the idp.
        const forward = await forwardPort(port, idp.url);
        try {
          assert.equal((await request(notes.url, 'GET', '/readyz')).status, 200);
          const list = await request(notes.url, 'GET', '/notes', { token: user.token });
          assert.equal(list.status, 200);
          assert.deepEqual(list.body, [note.body]);
          const email = uniqueEmail('recovered');
          assert.equal((await request(notes.url, 'POST', '/auth/register', { body: { email, password: PASSWORD } })).status, 201);
          assert.equal((await request(notes.url, 'POST', '/auth/login', { body: { email, password: PASSWORD } })).status, 200);
          assert.equal((await request(notes.url, 'DELETE', `/notes/${note.body.id}`, { token: user.token })).status, 200);
        } finally {
          await forward.close();
        }
      } finally {
        await notes.close();
      }
    });
  });
}

describe('idp failing with 5xx', () => {
  test('auth 500/502/503 answers (supabase-js does not read their body) become 503 for register, login and token checks', async () => {
    const user = await signUp(direct.url, 'fivexx');
    for (const status of [500, 502, 503]) {
      const failing = await startUpstream(idp.url, () => ({ status, body: { message: 'upstream exploded' } }));
      const notes = await startNotes({ idp: { ...idp, url: failing.url } });
      try {
        const replies = await everyRoute(notes.url, user.token, 1);
        assertAllUnavailable(replies);
        // The upstream's own message is not passed on.
        assert.doesNotMatch(JSON.stringify(replies.map(([, r]) => r.body)), /exploded/);
      } finally {
        await notes.close();
        await failing.close();
      }
    }
  });

  test('a refresh meeting an outage is 503 after one request: supabase-js would retry it for up to 30 s; the token still works afterwards', async () => {
    const user = await signUp(direct.url, 'refresh-outage');
    for (const failure of [502, 503, 504, 'unreachable'] as const) {
      const tokenRequests = () => upstream.seen.filter((s) => s === 'POST /auth/v1/token').length;
      const upstream = await startUpstream(idp.url, (_m, path) =>
        path.startsWith('/auth/v1/token')
          ? failure === 'unreachable'
            ? 'hang'
            : { status: failure, body: { message: 'down' } }
          : 'forward',
      );
      // 'unreachable': the request hangs until IDP_TIMEOUT_MS, as a dead host's would.
      const notes = await startNotes({ idp: { ...idp, url: upstream.url }, env: { IDP_TIMEOUT_MS: '1000' } });
      try {
        const started = Date.now();
        const res = await request(notes.url, 'POST', '/auth/refresh', { body: { refresh_token: user.refreshToken } });
        const waited = Date.now() - started;
        assert.equal(res.status, 503, `${failure}: ${JSON.stringify(res.body)}`);
        // A bound on the wait, not a speed figure: one IDP_TIMEOUT_MS at most (plus a busy
        // machine's slack), where supabase-js's own retries would hold the caller about 25 s.
        assert.ok(waited < 1000 + 5000, `${failure}: answered after ${waited} ms`);
        assert.deepEqual(res.body, UNAVAILABLE);
        // Past the first retry's backoff (200 ms): still the one request.
        await new Promise((resolve) => setTimeout(resolve, 600));
        assert.equal(tokenRequests(), 1, `${failure}: one refresh request, no retries`);
      } finally {
        await notes.close();
        await upstream.close();
      }
    }
    // The refresh token was never spent: it still gives a session.
    const again = await request(direct.url, 'POST', '/auth/refresh', { body: { refresh_token: user.refreshToken } });
    assert.equal(again.status, 200);
  });

  test('REST 502/503/504 become 503; REST 401 for the token becomes 401 "Invalid or expired token"', async () => {
    const user = await signUp(direct.url, 'rest5xx');
    let restAnswer: { status: number; body: unknown } = {
      status: 503,
      body: { code: 'PGRST002', message: 'Could not query the database for the schema cache. Retrying.', details: null, hint: null },
    };
    // Auth and JWKS go to the real idp; only /rest fails.
    const upstream = await startUpstream(idp.url, (_m, path) => (path.startsWith('/rest/') ? restAnswer : 'forward'));
    try {
      for (const mode of ['remote', 'local'] as const) {
        const notes = await startNotes({ idp: { ...idp, url: upstream.url }, env: { IDP_VERIFY: mode } });
        try {
          for (const status of [502, 503, 504]) {
            restAnswer = { status, body: { message: 'bad gateway' } };
            for (const [name, res] of (await everyRoute(notes.url, user.token, 1)).slice(2)) {
              assert.equal(res.status, 503, `${mode} ${status} ${name}`);
              assert.deepEqual(res.body, UNAVAILABLE);
            }
          }
          restAnswer = { status: 401, body: { code: 'PGRST303', message: 'JWT expired', details: null, hint: null } };
          for (const [name, res] of (await everyRoute(notes.url, user.token, 1)).slice(2)) {
            assert.equal(res.status, 401, `${mode} ${name}`);
            assert.deepEqual(res.body, { message: 'Invalid or expired token' });
          }
          // A GET is not retried behind the client's back: one REST request per call.
          const before = upstream.seen.filter((s) => s.startsWith('GET /rest/')).length;
          restAnswer = { status: 503, body: { message: 'unavailable' } };
          await request(notes.url, 'GET', '/notes', { token: user.token });
          assert.equal(upstream.seen.filter((s) => s.startsWith('GET /rest/')).length, before + 1);
        } finally {
          await notes.close();
        }
      }
    } finally {
      await upstream.close();
    }
  });
});

describe('idp too slow', () => {
  test('a request the idp never answers ends as 503 after IDP_TIMEOUT_MS, not a hung client', async () => {
    const user = await signUp(direct.url, 'slow');
    const hanging = await startUpstream(undefined, () => 'hang');
    const notes = await startNotes({ idp: { ...idp, url: hanging.url }, env: { IDP_TIMEOUT_MS: '300' } });
    try {
      const started = Date.now();
      assertAllUnavailable(await everyRoute(notes.url, user.token, 1));
      const elapsed = Date.now() - started;
      assert.ok(elapsed < 5 * 2000, `took ${elapsed} ms`);
      const readyStart = Date.now();
      assert.equal((await request(notes.url, 'GET', '/readyz')).status, 503);
      // One IDP_TIMEOUT_MS plus a busy machine's slack: readiness never hangs on the idp.
      assert.ok(Date.now() - readyStart < 5000, `readyz took ${Date.now() - readyStart} ms`);
    } finally {
      await notes.close();
      await hanging.close();
    }
  });
});

describe("the idp refusing this service's keys", () => {
  test('a wrong secret key makes token checks 503 (a configuration fault), not 401 for every user', async () => {
    const user = await signUp(direct.url, 'wrongkey');
    const notes = await startNotes({ idp: { ...idp, secretKey: 'sb_secret_not_the_right_one' } });
    try {
      const res = await request(notes.url, 'GET', '/notes', { token: user.token });
      assert.equal(res.status, 503);
      assert.deepEqual(res.body, UNAVAILABLE);
      assert.match(String(notes.logs.lines().find((l) => l.msg === 'identity provider unavailable')?.reason), /API key/i);
    } finally {
      await notes.close();
    }
  });

  test('a wrong publishable key makes register and login 503, not 400/401', async () => {
    const notes = await startNotes({ idp: { ...idp, publishableKey: 'sb_publishable_not_the_right_one' } });
    try {
      const email = uniqueEmail('wrongpub');
      const register = await request(notes.url, 'POST', '/auth/register', { body: { email, password: PASSWORD } });
      const login = await request(notes.url, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
      for (const res of [register, login]) {
        assert.equal(res.status, 503);
        assert.deepEqual(res.body, UNAVAILABLE);
      }
    } finally {
      await notes.close();
    }
  });
});
