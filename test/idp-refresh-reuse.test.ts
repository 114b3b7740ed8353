// The refresh-token reuse interval: the token a rotation replaced still gets the session's current
// token back, but only for IDP_REFRESH_TOKEN_REUSE_INTERVAL seconds (GoTrue's
// GOTRUE_SECURITY_REFRESH_TOKEN_REUSE_INTERVAL, default 10). After that, presenting it is reuse:
// 400 refresh_token_already_used, and the whole session goes, the current token with it. Driven
// with supabase-js against the real idp, whose clock the test moves.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuthSessionMissingError } from '@supabase/supabase-js';
import { idpConfig } from '../src/idp/config.js';
import { manualClock } from '../src/kit/clock.js';
import { ConfigErrors, loadConfig } from '../src/kit/config.js';
import { createUser, type RunningIdp, startIdp, TEST_PUBLISHABLE_KEY, TEST_SECRET_KEY } from './helpers/idp.js';
import { supabase } from './helpers/supabase.js';
import { uniqueEmail } from './helpers/emails.js';

const clock = manualClock(Date.now());
let idp: RunningIdp;

before(async () => {
  idp = await startIdp({ clock });
});
after(async () => {
  await idp?.close();
});

const INTERVAL_MS = 10_000;

function assertAuthError(error: unknown, expected: { status: number; code: string; message: string }) {
  assert.ok(error, 'expected an error');
  const e = error as { status: number; code?: string; message: string };
  assert.deepEqual({ status: e.status, code: e.code, message: e.message }, expected);
}
const ALREADY_USED = { status: 400, code: 'refresh_token_already_used', message: 'Invalid Refresh Token: Already Used' };
const NOT_FOUND = { status: 400, code: 'refresh_token_not_found', message: 'Invalid Refresh Token: Refresh Token Not Found' };

/** A session rotated once: rt1 (replaced now) and rt2 (current) with its access token. */
async function rotatedOnce() {
  const user = await createUser(idp, uniqueEmail('reuse'));
  const rotated = await supabase(idp).auth.refreshSession({ refresh_token: user.refreshToken });
  assert.equal(rotated.error, null);
  return { previous: user.refreshToken, current: rotated.data.session!.refresh_token, accessToken: rotated.data.session!.access_token };
}

describe('refresh token reuse interval', () => {
  test('within the interval the previous token gets the current one back, as often as asked, up to the last millisecond', async () => {
    const { previous, current, accessToken } = await rotatedOnce();
    for (const wait of [0, 5_000, INTERVAL_MS - 5_000]) {
      clock.advance(wait);
      const replay = await supabase(idp).auth.refreshSession({ refresh_token: previous });
      assert.equal(replay.error, null);
      assert.equal(replay.data.session!.refresh_token, current, 'the current token, not a new rotation');
    }
    // The current token still rotates normally, and the session is intact.
    const next = await supabase(idp).auth.refreshSession({ refresh_token: current });
    assert.equal(next.error, null);
    assert.notEqual(next.data.session!.refresh_token, current);
    assert.equal((await supabase(idp).auth.getUser(accessToken)).error, null);
  });

  test('after the interval the previous token is reuse: 400 refresh_token_already_used, and the current token and the session are revoked too', async () => {
    const { previous, current, accessToken } = await rotatedOnce();
    clock.advance(INTERVAL_MS + 1);
    const reuse = await supabase(idp).auth.refreshSession({ refresh_token: previous });
    assertAuthError(reuse.error, ALREADY_USED);
    assert.equal(reuse.data.session, null);

    // The legitimate holder's current token is gone with the family ...
    const afterReuse = await supabase(idp).auth.refreshSession({ refresh_token: current });
    assertAuthError(afterReuse.error, NOT_FOUND);
    // ... and so is the session its access tokens name.
    const getUser = await supabase(idp).auth.getUser(accessToken);
    assert.ok(getUser.error instanceof AuthSessionMissingError);
  });

  test('a thief replaying the replaced token minutes later is refused, and the session it stole from ends', async () => {
    // The victim refreshes every few minutes; the thief copied rt1 and replays it once the
    // victim has moved on. Before the interval limit the thief got the victim's current token
    // back each time and both shared the session for good.
    const { previous: stolen, current } = await rotatedOnce();
    clock.advance(5 * 60_000);
    const thief = await supabase(idp).auth.refreshSession({ refresh_token: stolen });
    assertAuthError(thief.error, ALREADY_USED);
    const victim = await supabase(idp).auth.refreshSession({ refresh_token: current });
    assertAuthError(victim.error, NOT_FOUND);
  });

  test('a token two rotations old is reuse even inside the interval', async () => {
    const { previous: rt1, current: rt2 } = await rotatedOnce();
    const third = await supabase(idp).auth.refreshSession({ refresh_token: rt2 });
    assert.equal(third.error, null);
    const reuse = await supabase(idp).auth.refreshSession({ refresh_token: rt1 });
    assertAuthError(reuse.error, ALREADY_USED);
    assertAuthError((await supabase(idp).auth.refreshSession({ refresh_token: third.data.session!.refresh_token })).error, NOT_FOUND);
  });

  test('IDP_REFRESH_TOKEN_REUSE_INTERVAL: 10 s by default, whole seconds from 0 to 3600', () => {
    const keys = { IDP_PUBLISHABLE_KEY: TEST_PUBLISHABLE_KEY, IDP_SECRET_KEY: TEST_SECRET_KEY };
    assert.equal(loadConfig(idpConfig, keys).IDP_REFRESH_TOKEN_REUSE_INTERVAL, 10);
    assert.equal(loadConfig(idpConfig, { ...keys, IDP_REFRESH_TOKEN_REUSE_INTERVAL: '0' }).IDP_REFRESH_TOKEN_REUSE_INTERVAL, 0);
    assert.equal(loadConfig(idpConfig, { ...keys, IDP_REFRESH_TOKEN_REUSE_INTERVAL: '1' }).IDP_REFRESH_TOKEN_REUSE_INTERVAL, 1);
    for (const bad of ['-1', '1.5', '3601', 'ten']) {
      assert.throws(() => loadConfig(idpConfig, { ...keys, IDP_REFRESH_TOKEN_REUSE_INTERVAL: bad }), ConfigErrors, bad);
    }
  });
});
