import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { accountsConfig } from '../src/accounts/config.js';
import { ConfigErrors, loadConfig } from '../src/kit/config.js';
import { spawnEntry } from './helpers/process.js';

const SECRET = 'x'.repeat(32);

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(accountsConfig, env);
  } catch (err) {
    assert.ok(err instanceof ConfigErrors);
    return err.problems.map((p) => p.message);
  }
  return [];
}

test('defaults: PORT 3000, JWT_EXPIRES_IN one hour, no admin, no Redis, LOG_LEVEL info', () => {
  const config = loadConfig(accountsConfig, { JWT_SECRET: SECRET });
  assert.equal(config.PORT, 3000);
  assert.equal(config.JWT_EXPIRES_IN, 3600);
  assert.equal(config.ADMIN_EMAIL, undefined);
  assert.equal(config.ADMIN_PASSWORD, undefined);
  assert.equal(config.REDIS_URL, undefined);
  assert.equal(config.DATABASE_URL, undefined);
  assert.equal(config.TRUST_PROXY, undefined);
  assert.equal(config.LOG_LEVEL, 'info');
  assert.equal(config.REGISTER_MAX_PER_IP, 1000);
  assert.equal(config.REGISTER_WINDOW, 3600);
  assert.equal(config.BCRYPT_QUEUE_MAX, 32);
});

test('every variable is read', () => {
  const config = loadConfig(accountsConfig, {
    PORT: '4000',
    JWT_SECRET: SECRET,
    JWT_EXPIRES_IN: '15m',
    ADMIN_EMAIL: '  Boss@Example.COM ',
    ADMIN_PASSWORD: 'boss password',
    DATABASE_URL: 'postgres://u@db:5432/accounts',
    REDIS_URL: 'redis://cache:6379',
    TRUST_PROXY: '10.0.0.1',
    LOG_LEVEL: 'debug',
    REGISTER_MAX_PER_IP: '50',
    REGISTER_WINDOW: '15m',
    BCRYPT_QUEUE_MAX: '8',
  });
  assert.equal(config.REGISTER_MAX_PER_IP, 50);
  assert.equal(config.REGISTER_WINDOW, 900);
  assert.equal(config.BCRYPT_QUEUE_MAX, 8);
  assert.equal(config.PORT, 4000);
  assert.equal(config.JWT_EXPIRES_IN, 900);
  assert.equal(config.ADMIN_EMAIL, 'boss@example.com');
  assert.equal(config.ADMIN_PASSWORD, 'boss password');
  assert.equal(config.DATABASE_URL, 'postgres://u@db:5432/accounts');
  assert.equal(config.REDIS_URL, 'redis://cache:6379');
  assert.equal(config.TRUST_PROXY, '10.0.0.1');
  assert.equal(config.LOG_LEVEL, 'debug');
});

test('JWT_SECRET is required and must be at least 32 bytes (bytes, not characters)', () => {
  assert.deepEqual(problemsOf({}), ['JWT_SECRET is required but not set']);
  assert.deepEqual(problemsOf({ JWT_SECRET: '' }), ['JWT_SECRET is required but not set']);
  assert.deepEqual(problemsOf({ JWT_SECRET: 'x'.repeat(31) }), ['JWT_SECRET must be at least 32 bytes long']);
  assert.deepEqual(problemsOf({ JWT_SECRET: 'é'.repeat(16) }), []);
  assert.deepEqual(problemsOf({ JWT_SECRET: SECRET }), []);
});

test('an invalid JWT_EXPIRES_IN, admin email or admin password is a config error naming the variable', () => {
  assert.match(problemsOf({ JWT_SECRET: SECRET, JWT_EXPIRES_IN: '1 hour' })[0]!, /^JWT_EXPIRES_IN must be a duration/);
  assert.match(problemsOf({ JWT_SECRET: SECRET, JWT_EXPIRES_IN: '0' })[0]!, /^JWT_EXPIRES_IN /);
  assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, ADMIN_PASSWORD: 'short' }), ['ADMIN_PASSWORD must be between 8 and 72 characters']);
  assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, ADMIN_PASSWORD: 'é'.repeat(37) }), [
    'ADMIN_PASSWORD must be at most 72 bytes in UTF-8',
  ]);
  assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, ADMIN_EMAIL: 'boss' }), ['ADMIN_EMAIL must be a valid email address']);
  assert.match(problemsOf({ JWT_SECRET: SECRET, REDIS_URL: 'http://cache' })[0]!, /^REDIS_URL /);
  assert.match(problemsOf({ JWT_SECRET: SECRET, PORT: 'eighty' })[0]!, /^PORT /);
});

test('JWT_ALGORITHM: HS256 by default (the contract), ES256 on request, nothing else', () => {
  assert.equal(loadConfig(accountsConfig, { JWT_SECRET: SECRET }).JWT_ALGORITHM, 'HS256');
  assert.equal(loadConfig(accountsConfig, { JWT_SECRET: SECRET, JWT_ALGORITHM: 'ES256' }).JWT_ALGORITHM, 'ES256');
  for (const bad of ['es256', 'RS256', 'none', 'HS512']) {
    assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, JWT_ALGORITHM: bad }), [`JWT_ALGORITHM must be one of HS256, ES256, got "${bad}"`]);
  }
});

test('JWT_PRIVATE_KEY: an EC P-256 private key as PEM or JWK; anything else stops the start', () => {
  const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, JWT_PRIVATE_KEY: key.export({ type: 'pkcs8', format: 'pem' }).toString() }), []);
  assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, JWT_PRIVATE_KEY: key.export({ type: 'sec1', format: 'pem' }).toString() }), []);
  assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, JWT_PRIVATE_KEY: JSON.stringify(key.export({ format: 'jwk' })) }), []);
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const publicOnly = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
  for (const bad of [rsa, p384, publicOnly, 'not a key', '{"kty":"EC"}']) {
    assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, JWT_PRIVATE_KEY: bad }), [
      'JWT_PRIVATE_KEY must be an ES256 (EC P-256) private key, as PEM or as a JWK with "d"',
    ]);
  }
});

test('JWT_PREVIOUS_PUBLIC_KEYS: a JWKS, one JWK or PEM public keys; private keys and other curves are refused', () => {
  const pairs = [0, 1].map(() => generateKeyPairSync('ec', { namedCurve: 'P-256' }));
  const jwks = JSON.stringify({ keys: pairs.map((p) => ({ ...p.publicKey.export({ format: 'jwk' }), kid: 'any', alg: 'ES256' })) });
  const pems = pairs.map((p) => p.publicKey.export({ type: 'spki', format: 'pem' }).toString()).join('');
  const previous = (raw: string) =>
    loadConfig(accountsConfig, { JWT_SECRET: SECRET, JWT_PREVIOUS_PUBLIC_KEYS: raw }).JWT_PREVIOUS_PUBLIC_KEYS;
  assert.equal(previous(jwks)?.length, 2);
  assert.equal(previous(pems)?.length, 2);
  assert.equal(previous(JSON.stringify(pairs[0]!.publicKey.export({ format: 'jwk' })))?.length, 1);
  assert.ok(previous(pems)![1]!.equals(pairs[1]!.publicKey));
  assert.equal(loadConfig(accountsConfig, { JWT_SECRET: SECRET }).JWT_PREVIOUS_PUBLIC_KEYS, undefined);

  const problem = (raw: string) => problemsOf({ JWT_SECRET: SECRET, JWT_PREVIOUS_PUBLIC_KEYS: raw });
  const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey;
  const bad: Array<[string, RegExp]> = [
    [JSON.stringify(pairs[0]!.privateKey.export({ format: 'jwk' })), /key 1: a private key/],
    [
      JSON.stringify({ keys: [pairs[0]!.publicKey.export({ format: 'jwk' }), pairs[1]!.privateKey.export({ format: 'jwk' })] }),
      /key 2: a private key/,
    ],
    [pairs[0]!.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), /a private key was given/],
    [p384.export({ type: 'spki', format: 'pem' }).toString(), /key 1: not a P-256 key/],
    [JSON.stringify({ keys: [] }), /none found/],
    ['{"keys": [', /not valid JSON/],
    ['not a key', /none found/],
  ];
  for (const [raw, why] of bad) {
    const [message, ...more] = problem(raw);
    assert.equal(more.length, 0);
    assert.match(message!, /^JWT_PREVIOUS_PUBLIC_KEYS must be EC P-256 public keys/);
    assert.match(message!, why);
  }
});

/** Starts the real entry point with only the given service variables and waits for it to exit. */
async function startServer(vars: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(JWT_|ADMIN_|REDIS_URL$|PORT$)/.test(k)) env[k] = v;
  }
  // Nothing here must get as far as a database; if it did, this one refuses quickly.
  Object.assign(env, { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', DATA_DIR: '/nonexistent', ...vars });
  const server = spawnEntry('src/accounts/server.ts', env);
  const timer = setTimeout(() => server.child.kill('SIGKILL'), 30_000);
  const code = await server.exited;
  clearTimeout(timer);
  return { code, stderr: server.stderr() };
}

test('ACCOUNTS_PUBLIC_URL: the local address by default in development, required with NODE_ENV=production', () => {
  assert.equal(loadConfig(accountsConfig, { JWT_SECRET: SECRET, PORT: '4100' }).ACCOUNTS_PUBLIC_URL, 'http://127.0.0.1:4100');
  assert.equal(loadConfig(accountsConfig, { JWT_SECRET: SECRET, NODE_ENV: 'development' }).ACCOUNTS_PUBLIC_URL, 'http://127.0.0.1:3000');
  assert.deepEqual(problemsOf({ JWT_SECRET: SECRET, NODE_ENV: 'production' }), [
    'ACCOUNTS_PUBLIC_URL is required when NODE_ENV=production (the address mails link to, e.g. https://accounts.example.com)',
  ]);
  const set = { JWT_SECRET: SECRET, NODE_ENV: 'production', ACCOUNTS_PUBLIC_URL: 'https://accounts.example.com' };
  assert.equal(loadConfig(accountsConfig, set).ACCOUNTS_PUBLIC_URL, 'https://accounts.example.com');
});

test('the process refuses to start: exit 1 and one stderr line naming the bad variable', async (t) => {
  const cases: Array<[string, Record<string, string>, RegExp]> = [
    ['JWT_SECRET missing', {}, /^config error: JWT_SECRET is required but not set$/],
    ['JWT_SECRET too short', { JWT_SECRET: 'short-secret' }, /^config error: JWT_SECRET must be at least 32 bytes long$/],
    ['JWT_EXPIRES_IN invalid', { JWT_SECRET: SECRET, JWT_EXPIRES_IN: '1week' }, /^config error: JWT_EXPIRES_IN must be a duration/],
    [
      'ADMIN_PASSWORD too short',
      { JWT_SECRET: SECRET, ADMIN_EMAIL: 'a@example.com', ADMIN_PASSWORD: 'admin' },
      /^config error: ADMIN_PASSWORD must be between 8 and 72 characters$/,
    ],
    [
      'production without ACCOUNTS_PUBLIC_URL',
      { JWT_SECRET: SECRET, NODE_ENV: 'production' },
      /^config error: ACCOUNTS_PUBLIC_URL is required when NODE_ENV=production \(the address mails link to, e\.g\. https:\/\/accounts\.example\.com\)$/,
    ],
  ];
  const results = await Promise.all(cases.map(([, vars]) => startServer(vars)));
  for (const [i, [label, , line]] of cases.entries()) {
    await t.test(label, () => {
      const { code, stderr } = results[i]!;
      assert.equal(code, 1, stderr);
      const lines = stderr.split('\n').filter((l) => l.trim() !== '' && !/ExperimentalWarning|--trace-warnings/.test(l));
      assert.equal(lines.length, 1, stderr);
      assert.match(lines[0]!, line);
    });
  }
});
