// Configuration and the process entry: refusing to start, defaults, a real
// start on this Node version (supabase-js needs the ws transport on Node 20),
// readiness against the idp, and draining on SIGTERM.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ConfigErrors, loadConfig } from '../src/kit/config.js';
import { notesConfig } from '../src/notes/config.js';
import { startIdp, type RunningIdp } from './helpers/idp.js';
import { startNotes, startUpstream } from './helpers/notes.js';
import { request } from './helpers/http.js';
import { closedPort } from './helpers/ports.js';
import { spawnEntry } from './helpers/process.js';

interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
}

const baseEnv = () => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' });

/** Runs server.ts to completion (for configurations it must refuse). */
async function runServer(env: Record<string, string>): Promise<Exited> {
  const server = spawnEntry('src/notes/server.ts', { ...baseEnv(), ...env });
  const timer = setTimeout(() => server.child.kill('SIGKILL'), 20_000);
  const code = await server.exited;
  clearTimeout(timer);
  if (server.child.signalCode === 'SIGKILL') throw new Error(`server.ts did not exit; stdout: ${server.stdout()}`);
  return { code, stdout: server.stdout(), stderr: server.stderr() };
}

/** Starts server.ts and resolves once it logged its address. */
function launchServer(env: Record<string, string>) {
  const server = spawnEntry('src/notes/server.ts', { ...baseEnv(), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env });
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line; stdout: ${server.stdout()} stderr: ${server.stderr()}`)), 20_000);
    server.child.stdout!.on('data', () => {
      const match = /notes listening on (http:\/\/[\d.:]+)/.exec(server.stdout());
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void server.exited.then((code) => reject(new Error(`exited with ${code} before listening: ${server.stderr()}`)));
  });
  return { child: server.child, url, exited: server.exited, output: server.stdout };
}

const REQUIRED = ['IDP_URL', 'IDP_SECRET_KEY', 'IDP_PUBLISHABLE_KEY'] as const;
const completeEnv = { IDP_URL: 'http://127.0.0.1:54321', IDP_SECRET_KEY: 'sb_secret_x', IDP_PUBLISHABLE_KEY: 'sb_publishable_x' };

describe('notes configuration', () => {
  test('refuses to start without any of the three idp variables: exit 1, one line naming each', async () => {
    const { code, stderr } = await runServer({});
    assert.equal(code, 1);
    const lines = stderr.trim().split('\n');
    assert.deepEqual(
      lines,
      REQUIRED.map((name) => `config error: ${name} is required but not set`),
    );
  });

  for (const missing of REQUIRED) {
    test(`refuses to start when only ${missing} is missing, naming it alone`, async () => {
      const env: Record<string, string> = { ...completeEnv };
      delete env[missing];
      const { code, stderr } = await runServer(env);
      assert.equal(code, 1);
      assert.equal(stderr.trim(), `config error: ${missing} is required but not set`);
    });
  }

  test('an IDP_URL that is not http(s) and an unknown IDP_VERIFY are refused', async () => {
    const { code, stderr } = await runServer({ ...completeEnv, IDP_URL: 'ftp://idp.example', IDP_VERIFY: 'sometimes' });
    assert.equal(code, 1);
    const lines = stderr.trim().split('\n');
    assert.equal(lines.length, 2);
    assert.match(lines[0]!, /^config error: IDP_URL must be an http\(s\) URL/);
    assert.match(lines[1]!, /^config error: IDP_VERIFY must be one of remote, local/);
  });

  test('defaults: port 9999, remote verification, 5 s idp timeout; DATABASE_URL is not part of it', () => {
    const config = loadConfig(notesConfig, completeEnv);
    assert.equal(config.PORT, 9999);
    assert.equal(config.IDP_VERIFY, 'remote');
    assert.equal(config.IDP_TIMEOUT_MS, 5000);
    assert.equal(config.LOG_LEVEL, 'info');
    assert.equal('DATABASE_URL' in config, false);
    // A malformed DATABASE_URL (meant for another service) does not stop notes.
    assert.doesNotThrow(() => loadConfig(notesConfig, { ...completeEnv, DATABASE_URL: 'not a url' }));
    assert.equal(loadConfig(notesConfig, { ...completeEnv, IDP_URL: 'https://abc.supabase.co/' }).IDP_URL, 'https://abc.supabase.co');
    assert.throws(() => loadConfig(notesConfig, { ...completeEnv, IDP_TIMEOUT_MS: '10' }), ConfigErrors);
    // Where the recovery link leads: the service's own address unless told, and only http(s).
    assert.equal(config.NOTES_PUBLIC_URL, 'http://127.0.0.1:9999');
    assert.equal(loadConfig(notesConfig, { ...completeEnv, PORT: '8080' }).NOTES_PUBLIC_URL, 'http://127.0.0.1:8080');
    assert.equal(
      loadConfig(notesConfig, { ...completeEnv, NOTES_PUBLIC_URL: 'https://notes.example.com/' }).NOTES_PUBLIC_URL,
      'https://notes.example.com',
    );
    assert.throws(() => loadConfig(notesConfig, { ...completeEnv, NOTES_PUBLIC_URL: 'notes.example.com' }), ConfigErrors);
  });
});

describe('logging and proxies', () => {
  test('TRUST_PROXY decides whether X-Forwarded-For is believed; LOG_LEVEL=info logs requests, never the bearer token', async () => {
    const upstream = await startUpstream(undefined, () => ({ status: 200, body: { keys: [] } }));
    const idpLike = { url: upstream.url, secretKey: 's', publishableKey: 'p' };
    const trusting = await startNotes({ idp: idpLike, env: { LOG_LEVEL: 'info', TRUST_PROXY: '127.0.0.1' } });
    const plain = await startNotes({ idp: idpLike, env: { LOG_LEVEL: 'info' } });
    try {
      const headers = { 'x-forwarded-for': '203.0.113.7', authorization: 'Bearer secret-token-value' };
      await request(trusting.url, 'GET', '/healthz', { headers });
      await request(plain.url, 'GET', '/healthz', { headers });
      const addressOf = (logs: Array<Record<string, unknown>>) =>
        (logs.find((l) => l.msg === 'request completed')?.req as { remoteAddress?: string } | undefined)?.remoteAddress;
      assert.equal(addressOf(trusting.logs.lines()), '203.0.113.7');
      assert.equal(addressOf(plain.logs.lines()), '127.0.0.1');
      assert.doesNotMatch(trusting.logs.text() + plain.logs.text(), /secret-token-value/);
    } finally {
      await trusting.close();
      await plain.close();
      await upstream.close();
    }
  });
});

describe('the notes process', () => {
  let idp: RunningIdp;
  before(async () => {
    idp = await startIdp();
  });
  after(async () => {
    await idp?.close();
  });

  test(`starts on Node ${process.versions.node} without a database, is ready while the idp is up, stops on SIGTERM`, async () => {
    // No DATABASE_URL and no DATA_DIR: an embedded PostgreSQL would log and take seconds; notes must not start one.
    const server = launchServer({ IDP_URL: idp.url, IDP_SECRET_KEY: idp.secretKey, IDP_PUBLISHABLE_KEY: idp.publishableKey });
    try {
      const url = await server.url;
      assert.equal((await fetch(`${url}/healthz`)).status, 200);
      const ready = await fetch(`${url}/readyz`);
      assert.equal(ready.status, 200);
      assert.deepEqual(await ready.json(), { status: 'ready' });
      assert.doesNotMatch(server.output(), /postgres/i);
    } finally {
      server.child.kill('SIGTERM');
    }
    assert.equal(await server.exited, 0);
  });

  test('readiness is 503 {message} while the idp is unreachable', async () => {
    const port = await closedPort();
    const server = launchServer({ IDP_URL: `http://127.0.0.1:${port}`, IDP_SECRET_KEY: 's', IDP_PUBLISHABLE_KEY: 'p' });
    try {
      const url = await server.url;
      const ready = await fetch(`${url}/readyz`);
      assert.equal(ready.status, 503);
      const body = (await ready.json()) as Record<string, unknown>;
      assert.deepEqual(Object.keys(body), ['message']);
      // The process itself is alive.
      assert.equal((await fetch(`${url}/healthz`)).status, 200);
    } finally {
      server.child.kill('SIGTERM');
    }
    assert.equal(await server.exited, 0);
  });

  test('SIGTERM lets an in-flight request finish before exiting 0', async () => {
    // A slow idp: the login request is still waiting for it when the signal arrives.
    const slowIdp = await startUpstream(undefined, (_method, path) =>
      path.startsWith('/auth/v1/token') ? 'hang' : { status: 200, body: { keys: [] } },
    );
    const server = launchServer({ IDP_URL: slowIdp.url, IDP_SECRET_KEY: 's', IDP_PUBLISHABLE_KEY: 'p', IDP_TIMEOUT_MS: '1500' });
    try {
      const url = await server.url;
      const inFlight = fetch(`${url}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'a@example.com', password: 'whatever' }),
      });
      while (slowIdp.seen.length === 0) await new Promise((r) => setTimeout(r, 20));
      server.child.kill('SIGTERM');
      const res = await inFlight;
      // The idp never answered, so the bounded wait ends in 503 — but the answer arrives.
      assert.equal(res.status, 503);
      assert.deepEqual(Object.keys((await res.json()) as object), ['message']);
      assert.equal(await server.exited, 0);
    } finally {
      server.child.kill('SIGKILL');
      await slowIdp.close();
    }
  });
});
