// Property-based test (fast-check) of the bearer check on every protected route of accounts,
// notes (remote and local verification) and the idp: JWT-looking strings of every shape, over
// real HTTP (app.inject for accounts). The seed is printed; FUZZ_SEED=<seed> replays a failing run.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { reportFigures } from './helpers/figures.js';
import { envelopeOf, params, seed } from './helpers/properties.js';
import { startAccounts, type RunningAccounts } from '../helpers/accounts.js';
import { type RunningIdp, startIdp } from '../helpers/idp.js';
import { type RunningNotes, startNotes } from '../helpers/notes.js';
import { idpRequest, request } from '../helpers/http.js';
import { startAll } from '../helpers/services.js';

let accounts: RunningAccounts;
let idp: RunningIdp;
let notes: RunningNotes;
let notesLocal: RunningNotes;

before(async () => {
  [accounts, idp] = await startAll([startAccounts(), startIdp()]);
  [notes, notesLocal] = await startAll([
    startNotes({ idp, env: { IDP_VERIFY: 'remote' } }),
    startNotes({ idp, env: { IDP_VERIFY: 'local' } }),
  ]);
});

after(async () => {
  await notes?.close();
  await notesLocal?.close();
  await accounts?.close();
  await idp?.close();
});

describe('JWT-looking strings against every bearer-protected route', () => {
  const segment = fc.stringMatching(/^[A-Za-z0-9_-]{0,80}$/);
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const structured = fc
    .tuple(
      fc.record({
        alg: fc.constantFrom('none', 'HS256', 'HS512', 'ES256', 'RS256', 'EdDSA', 'None', ''),
        kid: fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
        typ: fc.constantFrom('JWT', 'at+jwt', undefined),
      }),
      fc.record({
        sub: fc.uuid(),
        id: fc.uuid(),
        role: fc.constantFrom('authenticated', 'service_role', 'admin', 'user', 'anon'),
        aud: fc.constantFrom('authenticated', 'anon', undefined),
        exp: fc.integer({ min: 0, max: 4_000_000_000 }),
        iat: fc.integer({ min: 0, max: 4_000_000_000 }),
      }),
      segment,
    )
    .map(([h, p, s]) => `${b64(h)}.${b64(p)}.${s}`);
  const tokens = fc
    .oneof(
      fc.tuple(segment, segment, segment).map((parts) => parts.join('.')),
      structured,
    )
    .filter((t) => !t.startsWith('sb_'));

  test('accounts, notes (both modes) and the idp refuse every one with their documented 401/403, never a 5xx', async (t) => {
    let requests = 0;
    const statuses: Record<string, number> = {};
    const expectStatus = (what: string, res: { status: number; text: string }, status: number) => {
      requests += 1;
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      assert.equal(res.status, status, `${what}: ${res.text.slice(0, 200)}`);
    };
    await fc.assert(
      fc.asyncProperty(tokens, async (token) => {
        for (const path of ['/auth/me', '/admin/users']) {
          const res = await accounts.app.inject({ method: 'GET', url: path, headers: { authorization: `Bearer ${token}` } });
          expectStatus(`accounts ${path}`, { status: res.statusCode, text: res.body }, 401);
          assert.equal(envelopeOf(res.body, 401).message, 'Invalid or expired token.');
        }
        for (const app of [notes, notesLocal]) {
          for (const [method, path, body] of [
            ['GET', '/notes'],
            ['POST', '/notes', { title: 'x' }],
            ['DELETE', '/notes/1'],
            ['POST', '/auth/password', { password: 'bearer-new-password' }],
          ] as const) {
            const res = await request(app.url, method, path, { token, body });
            expectStatus(`notes ${method} ${path}`, res, 401);
            assert.deepEqual(res.body, { message: 'Invalid or expired token' });
          }
        }
        for (const [method, path] of [
          ['GET', '/auth/v1/user'],
          ['PUT', '/auth/v1/user'],
          ['POST', '/auth/v1/logout'],
          ['POST', '/auth/v1/admin/users'],
          ['DELETE', `/auth/v1/admin/users/${randomUUID()}`],
          ['POST', '/auth/v1/invite'],
          ['POST', '/auth/v1/admin/generate_link'],
        ] as const) {
          const body =
            method === 'PUT'
              ? { email: 'bearer-change@example.com' }
              : path.endsWith('invite') || path.endsWith('generate_link')
                ? { type: 'magiclink', email: 'bearer@example.com' }
                : {};
          const res = await idpRequest(idp, method, path, { token, body: method === 'POST' || method === 'PUT' ? body : undefined });
          expectStatus(`idp ${method} ${path}`, res, 403);
          assert.equal(res.body.code, 'bad_jwt');
        }
        for (const method of ['GET', 'POST', 'PATCH', 'DELETE']) {
          const res = await idpRequest(idp, method, '/rest/v1/notes?id=eq.1', {
            token,
            body: method === 'POST' || method === 'PATCH' ? { title: 'x' } : undefined,
          });
          expectStatus(`idp ${method} /rest/v1/notes`, res, 401);
          assert.equal(res.body.code, 'PGRST301');
        }
      }),
      params(40),
    );
    reportFigures(t, 'property: JWT-looking strings on bearer routes', { runs: 40, requests, statuses, seed });
  });
});
