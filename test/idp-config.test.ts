// Configuration, the signing key's life cycle, and the per-database login role's name.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { authenticatorPassword, authenticatorRoleName, authenticatorUrl } from '../src/idp/authenticator.js';
import { idpConfig } from '../src/idp/config.js';
import { SigningKeys } from '../src/idp/keys.js';
import { systemClock } from '../src/kit/clock.js';
import { ConfigErrors, loadConfig } from '../src/kit/config.js';
import { TEST_PUBLISHABLE_KEY, TEST_SECRET_KEY, TEST_SIGNING_KEY } from './helpers/idp.js';

const keys = { IDP_PUBLISHABLE_KEY: TEST_PUBLISHABLE_KEY, IDP_SECRET_KEY: TEST_SECRET_KEY };

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(idpConfig, env);
    return [];
  } catch (err) {
    assert.ok(err instanceof ConfigErrors);
    return err.problems.map((p) => p.message);
  }
}

test('defaults: port 54321, autoconfirm on, 3600 s tokens, issuer base from the port', () => {
  const config = loadConfig(idpConfig, keys);
  assert.equal(config.PORT, 54321);
  assert.equal(config.IDP_AUTOCONFIRM, false, 'off unless asked for, as on a hosted Supabase project');
  assert.equal(config.IDP_JWT_EXPIRY, 3600);
  assert.equal(config.IDP_SIGNING_KEY, undefined);
  assert.equal(config.IDP_SITE_URL, 'http://127.0.0.1:54321');
  assert.equal(loadConfig(idpConfig, { ...keys, PORT: '8000' }).IDP_SITE_URL, 'http://127.0.0.1:8000');
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_SITE_URL: 'https://id.example.com/' }).IDP_SITE_URL, 'https://id.example.com');
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_AUTOCONFIRM: 'false' }).IDP_AUTOCONFIRM, false);
  assert.match(loadConfig(idpConfig, keys).IDP_MIGRATIONS_DIR, /supabase[/\\]migrations$/); // Sign-ups open, anonymous sign-ins off with GoTrue's 30 an hour per address, as GoTrue's defaults.
  assert.equal(config.IDP_DISABLE_SIGNUP, false);
  assert.equal(config.IDP_EXTERNAL_ANONYMOUS_USERS_ENABLED, false);
  assert.equal(config.IDP_RATE_LIMIT_ANONYMOUS_USERS, 30);
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_DISABLE_SIGNUP: 'true' }).IDP_DISABLE_SIGNUP, true);
  assert.equal(problems({ ...keys, IDP_RATE_LIMIT_ANONYMOUS_USERS: '0' }).length, 1);
});

test('mail: GoTrue defaults (24 h links, 60 s between mails), app URL from the site URL, redirect list checked', () => {
  const config = loadConfig(idpConfig, keys);
  assert.equal(config.IDP_MAILER_OTP_EXP, 3600);
  assert.equal(config.IDP_OTP_MAX_ATTEMPTS, 5);
  assert.equal(config.IDP_SMTP_MAX_FREQUENCY, 60);
  assert.equal(config.IDP_RATE_LIMIT_VERIFY, 30);
  assert.equal(config.SMTP_URL, undefined);
  assert.equal(config.IDP_APP_URL, 'http://127.0.0.1:54321');
  assert.deepEqual(config.IDP_REDIRECT_URLS, []);
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_SITE_URL: 'https://id.example.com' }).IDP_APP_URL, 'https://id.example.com');
  assert.deepEqual(
    loadConfig(idpConfig, { ...keys, IDP_REDIRECT_URLS: ' https://app.example.com/** , http://localhost:3000/cb,' }).IDP_REDIRECT_URLS,
    ['https://app.example.com/**', 'http://localhost:3000/cb'],
  );
  assert.deepEqual(problems({ ...keys, IDP_REDIRECT_URLS: 'https://ok.example.com,/relative' }), [
    'IDP_REDIRECT_URLS must be a comma-separated list of http(s) URLs, got "/relative"',
  ]);
  assert.equal(problems({ ...keys, IDP_MAILER_OTP_EXP: '10' }).length, 1);
  assert.equal(problems({ ...keys, IDP_SMTP_MAX_FREQUENCY: '0' }).length, 1);
  assert.equal(problems({ ...keys, SMTP_URL: 'http://mail.example.com' }).length, 1);
});

test('mail links: unset by default (GET /verify), a template is kept, a template that cannot work stops the start', () => {
  const defaults = loadConfig(idpConfig, keys);
  assert.equal(defaults.IDP_MAILER_LINK_RECOVERY, undefined);
  assert.equal(defaults.IDP_MAILER_SITE_NAME, '');
  assert.equal(defaults.IDP_MAILER_OFFER_CODE, true);
  const template = '{{ .SiteURL }}/reset-password?token_hash={{ .TokenHash }}&type=recovery';
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_MAILER_LINK_RECOVERY: ` ${template} ` }).IDP_MAILER_LINK_RECOVERY, template);
  assert.match(
    problems({ ...keys, IDP_MAILER_LINK_SIGNUP: '{{ .SiteURL }}/confirm?h={{ .TokenHsh }}' })[0]!,
    /unknown placeholder \{\{ \.TokenHsh \}\}/,
  );
  assert.match(problems({ ...keys, IDP_MAILER_LINK_SIGNUP: '{{ .SiteURL }}/confirm' })[0]!, /must carry the token/);
  assert.match(
    problems({ ...keys, IDP_MAILER_LINK_INVITE: '/confirm?token_hash={{ .TokenHash }}' })[0]!,
    /must start with an http\(s\) URL/,
  );
  assert.match(problems({ ...keys, IDP_MAILER_LINK_MAGICLINK: 'javascript:alert({{ .Token }})' })[0]!, /must start with an http\(s\) URL/);
  assert.match(problems({ ...keys, IDP_MAILER_OFFER_CODE: 'maybe' })[0]!, /IDP_MAILER_OFFER_CODE/);
});

test('both keys are required and must carry their own prefix', () => {
  assert.deepEqual(problems({}), ['IDP_PUBLISHABLE_KEY is required but not set', 'IDP_SECRET_KEY is required but not set']);
  assert.match(
    problems({ IDP_PUBLISHABLE_KEY: TEST_SECRET_KEY, IDP_SECRET_KEY: TEST_SECRET_KEY })[0]!,
    /^IDP_PUBLISHABLE_KEY must look like sb_publishable_/,
  );
  assert.match(problems({ ...keys, IDP_SECRET_KEY: TEST_PUBLISHABLE_KEY })[0]!, /^IDP_SECRET_KEY must look like sb_secret_/);
  assert.equal(problems({ ...keys, IDP_SECRET_KEY: 'sb_secret_' }).length, 1, 'a bare prefix is no key');
  assert.equal(problems({ ...keys, IDP_SECRET_KEY: 'sb_secret_has space' }).length, 1);
});

test('token lifetime at least 120 s (supabase-js refreshes anything at 90 s or less before each call)', () => {
  assert.deepEqual(problems({ ...keys, IDP_JWT_EXPIRY: '90' }), ['IDP_JWT_EXPIRY must be at least 120']);
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_JWT_EXPIRY: '120' }).IDP_JWT_EXPIRY, 120);
  assert.equal(problems({ ...keys, IDP_JWT_EXPIRY: 'soon' }).length, 1);
});

test('IDP_SIGNING_KEY: an EC P-256 private key as PEM or JWK; anything else stops the start', async () => {
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_SIGNING_KEY: TEST_SIGNING_KEY }).IDP_SIGNING_KEY, TEST_SIGNING_KEY.trim());
  const jwk = JSON.stringify(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' }));
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_SIGNING_KEY: jwk }).IDP_SIGNING_KEY, jwk);
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const publicOnly = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  for (const bad of [rsa, p384, publicOnly, 'not a key', '{"kty":"EC"}']) {
    assert.deepEqual(problems({ ...keys, IDP_SIGNING_KEY: bad }), [
      'IDP_SIGNING_KEY must be an ES256 (EC P-256) private key, as PEM or as a JWK with "d"',
    ]);
  }
  // PEM and JWK forms of one key give the same kid (an RFC 7638 thumbprint).
  const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  const fromPem = await SigningKeys.fromPrivateKey(pair.export({ type: 'pkcs8', format: 'pem' }).toString(), systemClock);
  const fromJwk = await SigningKeys.fromPrivateKey(JSON.stringify(pair.export({ format: 'jwk' })), systemClock);
  assert.equal(fromPem.kid, fromJwk.kid);
});

test('without IDP_SIGNING_KEY a key is generated once under DATA_DIR and reused after a restart', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'idp-keys-'));
  try {
    const first = await SigningKeys.load(undefined, dir, systemClock);
    const second = await SigningKeys.load(undefined, dir, systemClock);
    assert.equal(first.kid, second.kid);
    assert.equal(statSync(path.join(dir, 'secrets.json')).mode & 0o777, 0o600);
    const jwks = first.jwks();
    assert.equal(jwks.keys.length, 1);
    assert.equal('d' in jwks.keys[0]!, false);
    // A token from one instance verifies on the other.
    const now = Math.floor(Date.now() / 1000);
    const token = await first.sign({
      iss: 'x',
      sub: 's',
      aud: 'authenticated',
      exp: now + 300,
      iat: now,
      email: '',
      phone: '',
      app_metadata: {},
      user_metadata: {},
      role: 'authenticated',
      aal: 'aal1',
      amr: [],
      session_id: 'x',
      is_anonymous: false,
    });
    assert.equal((await second.verify(token)).ok, true);
    const elsewhere = await SigningKeys.load(undefined, mkdtempSync(path.join(tmpdir(), 'idp-keys-')), systemClock);
    assert.notEqual(elsewhere.kid, first.kid);
    assert.equal((await elsewhere.verify(token)).ok, false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('login role: <database>_authenticator, shortened with a hash to 63 bytes; password from the secret key', () => {
  assert.equal(authenticatorRoleName('t1a2b3c_idp_abcd1234'), 't1a2b3c_idp_abcd1234_authenticator');
  const long = 'x'.repeat(60);
  const longOther = `${'x'.repeat(59)}y`;
  const a = authenticatorRoleName(long);
  const b = authenticatorRoleName(longOther);
  assert.ok(Buffer.byteLength(a) <= 63);
  assert.ok(a.endsWith('_authenticator'));
  assert.notEqual(a, b, 'names that share a prefix stay distinct');
  const multibyte = authenticatorRoleName('ü'.repeat(40));
  assert.ok(Buffer.byteLength(multibyte) <= 63);
  assert.doesNotMatch(multibyte, /\uFFFD/);
  assert.equal(authenticatorPassword('sb_secret_a', 'r'), authenticatorPassword('sb_secret_a', 'r'));
  assert.notEqual(authenticatorPassword('sb_secret_a', 'r'), authenticatorPassword('sb_secret_b', 'r'));
  assert.match(authenticatorPassword('sb_secret_a', 'r'), /^[0-9a-f]{64}$/);
  assert.equal(
    authenticatorUrl('postgres://postgres:pw@127.0.0.1:5432/db?sslmode=disable', 'db_authenticator', 'abc'),
    'postgres://db_authenticator:abc@127.0.0.1:5432/db?sslmode=disable',
  );
});

test('the process refuses to start without its keys: exit 1, one line per variable', () => {
  const env: Record<string, string | undefined> = { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
  delete env.IDP_PUBLISHABLE_KEY;
  delete env.IDP_SECRET_KEY;
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/idp/server.ts'], { env, encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.status, 1);
  assert.equal(
    run.stderr.trim(),
    'config error: IDP_PUBLISHABLE_KEY is required but not set\nconfig error: IDP_SECRET_KEY is required but not set',
  );
});
