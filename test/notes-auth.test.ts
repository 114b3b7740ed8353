// Bearer authentication of /notes in both verification modes: the header rule,
// tokens that are tampered, expired, signed with another algorithm or key,
// users deleted after login (and the documented limit of local verification),
// and how many idp requests a check costs.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt, importPKCS8, type JWTPayload, SignJWT } from 'jose';
import { withLowSSignature } from '../src/kit/jws.js';
import { startIdp, TEST_SIGNING_KEY, type RunningIdp } from './helpers/idp.js';
import {
  recordingFetch,
  signUp,
  startNotes,
  storedNote,
  tamperedToken,
  unsignedToken,
  type RunningNotes,
  type TestUser,
} from './helpers/notes.js';
import { serviceClient } from './helpers/supabase.js';
import { request } from './helpers/http.js';

const MISSING = { message: 'Missing bearer token' };
const INVALID = { message: 'Invalid or expired token' };

let idp: RunningIdp;
let kid: string;
before(async () => {
  idp = await startIdp();
  const jwks = (await (await fetch(`${idp.url}/auth/v1/.well-known/jwks.json`, { headers: { apikey: idp.publishableKey } })).json()) as {
    keys: Array<{ kid: string }>;
  };
  kid = jwks.keys[0]!.kid;
});
after(async () => {
  await idp?.close();
});

/** A token signed by the idp's own key (what the idp would issue), with claims of our choosing. */
async function idpSignedToken(claims: JWTPayload, header: { kid?: string } = {}): Promise<string> {
  const key = await importPKCS8(TEST_SIGNING_KEY, 'ES256');
  // Low s, as the idp signs: the high-s twin is refused (see jws-low-s.test.ts).
  return withLowSSignature(await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: header.kid ?? kid }).sign(key));
}

function claimsOf(user: TestUser, change: JWTPayload = {}): JWTPayload {
  return { ...decodeJwt(user.token), ...change } as JWTPayload;
}

const routes = (id = 1) =>
  [
    ['GET', '/notes', undefined],
    ['POST', '/notes', { title: 'x' }],
    ['DELETE', `/notes/${id}`, undefined],
  ] as const;

for (const mode of ['remote', 'local'] as const) {
  describe(`bearer authentication (IDP_VERIFY=${mode})`, () => {
    let notes: RunningNotes;
    let user: TestUser;
    let other: TestUser;
    const requests = recordingFetch();
    before(async () => {
      notes = await startNotes({ idp, env: { IDP_VERIFY: mode }, deps: { fetch: requests.fetch } });
      user = await signUp(notes.url, `auth-${mode}`);
      other = await signUp(notes.url, `auth-other-${mode}`);
    });
    after(async () => {
      await notes?.close();
    });

    test('a missing or malformed Authorization header is 401 "Missing bearer token" on every notes route', async () => {
      const headers = [
        undefined,
        '',
        'Bearer',
        'Bearer ',
        `Basic ${user.token}`,
        `Token ${user.token}`,
        user.token,
        `Bearer  ${user.token}`,
        `Bearer ${user.token} extra`,
        `Bearer${user.token}`,
      ];
      for (const [method, path, body] of routes()) {
        for (const authorization of headers) {
          const res = await request(notes.url, method, path, {
            body,
            headers: authorization === undefined ? {} : { authorization },
          });
          assert.equal(res.status, 401, `${method} ${path} with ${JSON.stringify(authorization?.slice(0, 12))}`);
          assert.deepEqual(res.body, MISSING);
        }
      }
    });

    test('authentication runs before the body is validated', async () => {
      const res = await request(notes.url, 'POST', '/notes', { body: { title: '' } });
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, MISSING);
    });

    test('the scheme is matched case-insensitively', async () => {
      const res = await request(notes.url, 'GET', '/notes', { headers: { authorization: `bearer ${user.token}` } });
      assert.equal(res.status, 200);
    });

    test('register and login are public; health and docs need no token', async () => {
      for (const path of ['/healthz', '/readyz', '/docs/json']) {
        assert.equal((await request(notes.url, 'GET', path)).status, 200, path);
      }
    });

    test('bad tokens are 401 "Invalid or expired token" on every notes route', async () => {
      const hs256 = await new SignJWT(claimsOf(user))
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .sign(new TextEncoder().encode('some-secret-that-is-long-enough-for-hs256'));
      const hs256WithKid = await new SignJWT(claimsOf(user))
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid })
        .sign(new TextEncoder().encode('some-secret-that-is-long-enough-for-hs256'));
      const nowSeconds = Math.floor(Date.now() / 1000);
      const bad: Record<string, string> = {
        garbage: 'not-a-jwt',
        'three garbage parts': 'a.b.c',
        'tampered: sub of another user': tamperedToken(user.token, { sub: other.id }),
        'tampered: exp extended': tamperedToken(user.token, { exp: nowSeconds + 86_400 * 365 }),
        'signature of another token': `${user.token.split('.').slice(0, 2).join('.')}.${other.token.split('.')[2]}`,
        'HS256 with some secret': hs256,
        'HS256 with the real kid': hs256WithKid,
        'alg none': unsignedToken(claimsOf(user)),
        'alg none, no signature part': unsignedToken(claimsOf(user)).slice(0, -1),
        'the publishable key': idp.publishableKey,
        'the secret key': idp.secretKey,
        'idp key, expired': await idpSignedToken(claimsOf(user, { iat: nowSeconds - 7200, exp: nowSeconds - 3600 })),
        'idp key, wrong audience': await idpSignedToken(claimsOf(user, { aud: 'somebody-else' })),
        'idp key, unknown kid': await idpSignedToken(claimsOf(user), { kid: 'not-a-key-of-the-idp' }),
      };
      for (const [name, token] of Object.entries(bad)) {
        requests.seen.length = 0;
        for (const [method, path, body] of routes()) {
          const res = await request(notes.url, method, path, { token, body });
          assert.equal(res.status, 401, `${name}: ${method} ${path}`);
          assert.deepEqual(res.body, INVALID, name);
        }
        // Refused by the token check itself: the store never saw the token.
        assert.deepEqual(
          requests.seen.filter((r) => r.includes('/rest/')),
          [],
          `${name} reached the store`,
        );
      }
      // Nothing was written on behalf of any of them.
      assert.deepEqual((await request(notes.url, 'GET', '/notes', { token: user.token })).body, []);
      assert.deepEqual((await request(notes.url, 'GET', '/notes', { token: other.token })).body, []);
    });

    test('a well-formed token signed by the idp with no sub is refused', async () => {
      const { sub: _sub, ...claims } = claimsOf(user);
      requests.seen.length = 0;
      const res = await request(notes.url, 'GET', '/notes', { token: await idpSignedToken(claims) });
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, INVALID);
      assert.deepEqual(
        requests.seen.filter((r) => r.includes('/rest/')),
        [],
      );
    });

    test('a valid token attaches its user: notes are created as that user', async () => {
      const res = await request(notes.url, 'POST', '/notes', { token: user.token, body: { title: 'who am I' } });
      assert.equal(res.status, 201);
      assert.equal(res.body.user_id, user.id);
      const del = await request(notes.url, 'DELETE', `/notes/${res.body.id}`, { token: user.token });
      assert.equal(del.status, 200);
    });
  });
}

describe('expired tokens issued by the idp', () => {
  test('a token the idp issued in the past is 401 in both modes', async () => {
    let offsetMs = -2 * 3600 * 1000;
    const clockedIdp = await startIdp({ clock: () => Date.now() + offsetMs });
    const remote = await startNotes({ idp: clockedIdp, env: { IDP_VERIFY: 'remote' } });
    const local = await startNotes({ idp: clockedIdp, env: { IDP_VERIFY: 'local' } });
    try {
      // Signed up and logged in two hours ago: the token's exp is an hour past.
      const user = await signUp(remote.url, 'expired');
      assert.ok((decodeJwt(user.token).exp as number) < Date.now() / 1000 - 3000);
      offsetMs = 0;
      for (const notes of [remote, local]) {
        for (const [method, path, body] of routes()) {
          const res = await request(notes.url, method, path, { token: user.token, body });
          assert.equal(res.status, 401, `${method} ${path}`);
          assert.deepEqual(res.body, INVALID);
        }
      }
      // A fresh login works again.
      const fresh = await request(remote.url, 'POST', '/auth/login', {
        body: { email: user.email, password: 'correct-horse-battery-staple' },
      });
      assert.equal(fresh.status, 200);
      assert.equal((await request(local.url, 'GET', '/notes', { token: fresh.body.access_token })).status, 200);
    } finally {
      await remote.close();
      await local.close();
      await clockedIdp.close();
    }
  });
});

describe('local verification and time', () => {
  test("a token accepted (and remembered) a moment ago is refused once notes' clock passes its exp", async () => {
    let offsetMs = 0;
    const notes = await startNotes({ idp, env: { IDP_VERIFY: 'local' }, clock: () => Date.now() + offsetMs });
    try {
      const user = await signUp(notes.url, 'clock');
      assert.equal((await request(notes.url, 'GET', '/notes', { token: user.token })).status, 200);
      assert.equal((await request(notes.url, 'GET', '/notes', { token: user.token })).status, 200);
      const exp = decodeJwt(user.token).exp as number;
      offsetMs = exp * 1000 - Date.now() + 1000;
      const res = await request(notes.url, 'GET', '/notes', { token: user.token });
      assert.equal(res.status, 401);
      assert.deepEqual(res.body, INVALID);
      offsetMs = exp * 1000 - Date.now() - 5000;
      assert.equal((await request(notes.url, 'GET', '/notes', { token: user.token })).status, 200);
    } finally {
      await notes.close();
    }
  });
});

describe('a user deleted after login', () => {
  let remote: RunningNotes;
  let local: RunningNotes;
  before(async () => {
    remote = await startNotes({ idp, env: { IDP_VERIFY: 'remote' } });
    local = await startNotes({ idp, env: { IDP_VERIFY: 'local' } });
  });
  after(async () => {
    await remote?.close();
    await local?.close();
  });

  test('remote: their token is 401 at once, and their notes are gone with them', async () => {
    const doomed = await signUp(remote.url, 'doomed');
    const note = await request(remote.url, 'POST', '/notes', { token: doomed.token, body: { title: 'goes with me' } });
    assert.equal(note.status, 201);
    assert.ok(await storedNote(idp, note.body.id));

    const { error } = await serviceClient(idp).auth.admin.deleteUser(doomed.id);
    assert.equal(error, null);

    for (const [method, path, body] of routes(note.body.id)) {
      const res = await request(remote.url, method, path, { token: doomed.token, body });
      assert.equal(res.status, 401, `${method} ${path}`);
      assert.deepEqual(res.body, INVALID);
    }
    assert.equal(await storedNote(idp, note.body.id), undefined);
    const login = await request(remote.url, 'POST', '/auth/login', {
      body: { email: doomed.email, password: 'correct-horse-battery-staple' },
    });
    assert.equal(login.status, 401);
  });

  test('local (the documented trade-off): the token still passes until it expires, but there is nothing left to see and nothing can be written', async () => {
    const doomed = await signUp(local.url, 'doomed-local');
    const note = await request(local.url, 'POST', '/notes', { token: doomed.token, body: { title: 'goes with me' } });
    assert.equal(note.status, 201);
    assert.equal((await serviceClient(idp).auth.admin.deleteUser(doomed.id)).error, null);

    const list = await request(local.url, 'GET', '/notes', { token: doomed.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body, []);
    // The notes table references the user: the store refuses the insert (400 with its message).
    const create = await request(local.url, 'POST', '/notes', { token: doomed.token, body: { title: 'ghost' } });
    assert.equal(create.status, 400);
    assert.match(create.body.message, /foreign key/);
    const del = await request(local.url, 'DELETE', `/notes/${note.body.id}`, { token: doomed.token });
    assert.equal(del.status, 404);
    // Remote verification of the same token refuses it.
    assert.equal((await request(remote.url, 'GET', '/notes', { token: doomed.token })).status, 401);
  });
});

describe('cost of a token check', () => {
  test('remote: exactly one GET /auth/v1/user per request; local: none, the JWKS is fetched once', async () => {
    const remoteCalls = recordingFetch();
    const localCalls = recordingFetch();
    const remote = await startNotes({ idp, env: { IDP_VERIFY: 'remote' }, deps: { fetch: remoteCalls.fetch } });
    const local = await startNotes({ idp, env: { IDP_VERIFY: 'local' }, deps: { fetch: localCalls.fetch } });
    try {
      const user = await signUp(remote.url, 'cost');
      remoteCalls.seen.length = 0;
      for (let i = 0; i < 3; i++) assert.equal((await request(remote.url, 'GET', '/notes', { token: user.token })).status, 200);
      assert.deepEqual(remoteCalls.seen, Array(3).fill(['GET /auth/v1/user', 'GET /rest/v1/notes']).flat());

      for (let i = 0; i < 3; i++) assert.equal((await request(local.url, 'GET', '/notes', { token: user.token })).status, 200);
      assert.deepEqual(localCalls.seen, ['GET /auth/v1/.well-known/jwks.json', ...Array(3).fill('GET /rest/v1/notes')]);
    } finally {
      await remote.close();
      await local.close();
    }
  });
});
