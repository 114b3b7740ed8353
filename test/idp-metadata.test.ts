// User and app metadata are capped in size and depth on every path that writes them (sign-up
// `data`, admin createUser `user_metadata` / `app_metadata`), because both travel in every access
// token. Driven with supabase-js against the real idp.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_METADATA_BYTES, MAX_METADATA_DEPTH } from '../src/idp/auth/metadata.js';
import { mergeMetadata } from '../src/idp/auth/admin-users.js';
import { idpRequest } from './helpers/http.js';
import { createUser, sharedIdp } from './helpers/idp.js';
import { supabase } from './helpers/supabase.js';
import { uniqueEmail } from './helpers/emails.js';

const ctx = sharedIdp();

const PASSWORD = 'correct-horse-1';

/** An object whose JSON is exactly `bytes` long: {"k":"xxx…"}. */
function ofJsonSize(bytes: number): Record<string, unknown> {
  const value = { k: '' };
  value.k = 'x'.repeat(bytes - JSON.stringify(value).length);
  assert.equal(JSON.stringify(value).length, bytes);
  return value;
}

/** `levels` nested objects, the outermost included: 1 → {}, 2 → {"a":{}}, … */
function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
}

const userCount = async (address: string) =>
  (await ctx.db.query('SELECT count(*)::int AS n FROM auth.users WHERE email = $1', [address])).rows[0].n as number;

function assertRefused(error: unknown, message: RegExp) {
  assert.ok(error, 'expected an error');
  const e = error as { status: number; code?: string; message: string };
  assert.equal(e.status, 400);
  assert.equal(e.code, 'validation_failed');
  assert.match(e.message, message);
}

describe('metadata limits', () => {
  test('sign-up with 900 KB of data is refused with 400 validation_failed and stores nothing', async () => {
    const address = uniqueEmail('huge');
    const { data, error } = await supabase(ctx.idp).auth.signUp({
      email: address,
      password: PASSWORD,
      options: { data: ofJsonSize(900_000) },
    });
    assertRefused(error, /^data must be at most 4096 bytes as JSON \(got 900000\)$/);
    assert.equal(data.session, null);
    assert.equal(await userCount(address), 0);
  });

  test('sign-up data: exactly the limit passes, one byte more does not; the same for depth', async () => {
    const atLimit = await supabase(ctx.idp).auth.signUp({
      email: uniqueEmail('at-limit'),
      password: PASSWORD,
      options: { data: ofJsonSize(MAX_METADATA_BYTES) },
    });
    assert.equal(atLimit.error, null);
    assert.ok(atLimit.data.session);

    const over = await supabase(ctx.idp).auth.signUp({
      email: uniqueEmail('over'),
      password: PASSWORD,
      options: { data: ofJsonSize(MAX_METADATA_BYTES + 1) },
    });
    assertRefused(over.error, /^data must be at most 4096 bytes as JSON \(got 4097\)$/);

    const deepest = await supabase(ctx.idp).auth.signUp({
      email: uniqueEmail('deepest'),
      password: PASSWORD,
      options: { data: nested(MAX_METADATA_DEPTH) },
    });
    assert.equal(deepest.error, null);
    const tooDeep = await supabase(ctx.idp).auth.signUp({
      email: uniqueEmail('too-deep'),
      password: PASSWORD,
      options: { data: nested(MAX_METADATA_DEPTH + 1) },
    });
    assertRefused(tooDeep.error, /^data must not nest objects or arrays more than 10 levels deep$/);
    // Arrays count as levels too.
    const arrays = await supabase(ctx.idp).auth.signUp({
      email: uniqueEmail('arrays'),
      password: PASSWORD,
      options: { data: { a: [[[[[[[[[[]]]]]]]]]] } },
    });
    assertRefused(arrays.error, /more than 10 levels deep/);
  });

  test('size is counted in UTF-8 bytes, not characters', async () => {
    // 1,100 × "€" is 1,100 characters but 3,300 bytes; with the escaping of JSON none, so 3,308 in all.
    const fits = await supabase(ctx.idp).auth.signUp({
      email: uniqueEmail('euro'),
      password: PASSWORD,
      options: { data: { k: '€'.repeat(1100) } },
    });
    assert.equal(fits.error, null);
    const over = await supabase(ctx.idp).auth.signUp({
      email: uniqueEmail('euro-over'),
      password: PASSWORD,
      options: { data: { k: '€'.repeat(1400) } },
    });
    assertRefused(over.error, /got 4208\)$/);
  });

  test('admin createUser: user_metadata and app_metadata are capped the same way', async () => {
    const admin = supabase(ctx.idp, ctx.idp.secretKey).auth.admin;
    const cases: Array<{ attrs: Record<string, unknown>; message: RegExp }> = [
      { attrs: { user_metadata: ofJsonSize(MAX_METADATA_BYTES + 1) }, message: /^user_metadata must be at most 4096 bytes as JSON/ },
      { attrs: { app_metadata: ofJsonSize(MAX_METADATA_BYTES + 1) }, message: /^app_metadata must be at most 4096 bytes as JSON/ },
      { attrs: { user_metadata: nested(MAX_METADATA_DEPTH + 1) }, message: /^user_metadata must not nest/ },
      { attrs: { app_metadata: nested(MAX_METADATA_DEPTH + 1) }, message: /^app_metadata must not nest/ },
    ];
    for (const { attrs, message } of cases) {
      const address = uniqueEmail('admin-over');
      const { error } = await admin.createUser({ email: address, password: PASSWORD, email_confirm: true, ...attrs });
      assertRefused(error, message);
      assert.equal(await userCount(address), 0);
    }
  });

  test('with both metadata objects at the limit the access token stays under 12 KB', async () => {
    const address = uniqueEmail('largest');
    const created = await supabase(ctx.idp, ctx.idp.secretKey).auth.admin.createUser({
      email: address,
      password: PASSWORD,
      email_confirm: true,
      user_metadata: ofJsonSize(MAX_METADATA_BYTES),
      app_metadata: ofJsonSize(MAX_METADATA_BYTES),
    });
    assert.equal(created.error, null);
    const { data, error } = await supabase(ctx.idp).auth.signInWithPassword({ email: address, password: PASSWORD });
    assert.equal(error, null);
    const token = data.session!.access_token;
    assert.ok(token.length < 12_000, `token is ${token.length} bytes`);
    // And it works where tokens go: in a header.
    const user = await supabase(ctx.idp).auth.getUser(token);
    assert.equal(user.error, null);
    assert.equal(user.data.user?.email, address);
  });
});

describe('metadata keys named like object internals', () => {
  test('a body with a __proto__ key is refused as bad JSON and changes nothing', async () => {
    const user = await createUser(ctx.idp, uniqueEmail('proto'));
    const res = await idpRequest(ctx.idp, 'PUT', `/auth/v1/admin/users/${user.id}`, {
      apikey: ctx.idp.secretKey,
      raw: '{"app_metadata":{"__proto__":{"role":"admin"}}}',
    });
    assert.equal(res.status, 400);
    assert.equal((res.body as { code: string }).code, 'bad_json');
    const stored = await ctx.db.query('SELECT raw_app_meta_data FROM auth.users WHERE id = $1', [user.id]);
    assert.equal(Object.hasOwn(stored.rows[0].raw_app_meta_data, '__proto__'), false);
    assert.equal(({} as { role?: string }).role, undefined);
  });

  test('the merge stores such a key as a key and never swaps the prototype', () => {
    const merged = mergeMetadata({ plan: 'free' }, JSON.parse('{"__proto__":{"role":"admin"},"plan":"pro"}'));
    assert.equal(Object.getPrototypeOf(merged), Object.prototype);
    assert.equal((merged as { role?: string }).role, undefined);
    assert.deepEqual(JSON.parse(JSON.stringify(merged)), { plan: 'pro', ['__proto__']: { role: 'admin' } });
  });
});
