// The idp's GoTrue and PostgREST error handlers classify failures with the
// kit's classifyError, like every service: an outage (database, pool, file
// descriptors) is a 503 in each format, a client gone mid-body is nobody's
// outage.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { FastifyRequest } from 'fastify';
import { unexpectedAuthError } from '../src/idp/auth/errors.js';
import { toRestError } from '../src/idp/rest/errors.js';
import { type RunningIdp, startIdp } from './helpers/idp.js';
import { testLogLevel } from './helpers/logs.js';

let idp: RunningIdp;

before(async () => {
  idp = await startIdp({ env: { LOG_LEVEL: testLogLevel('info') } });
});

after(async () => {
  await idp.close();
});

/** Sends a request whose body stops short of its Content-Length, then closes the connection. */
async function abortMidBody(path: string): Promise<void> {
  const { hostname, port } = new URL(idp.url);
  await new Promise<void>((resolve) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: x\r\napikey: ${idp.publishableKey}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"email":"a`,
      );
      setTimeout(() => {
        socket.destroy();
        resolve();
      }, 100);
    });
    socket.on('error', () => {});
  });
}

const emfile = () =>
  Object.assign(new Error('connect EMFILE 127.0.0.1:5432 - Local (undefined:undefined)'), {
    code: 'EMFILE',
    errno: -24,
    syscall: 'connect',
  });
const poolTimeout = () => new Error('timeout exceeded when trying to connect');
const quietRequest = { log: { info() {}, warn() {}, error() {} } } as unknown as FastifyRequest;

describe('idp: failures classified like every service', () => {
  it('a client gone mid-body on /auth/v1 and /rest/v1 is no database outage and no 5xx', async () => {
    const before = idp.logs.lines().length;
    await abortMidBody('/auth/v1/signup');
    await abortMidBody('/rest/v1/notes');
    const started = Date.now();
    const gone = () =>
      idp.logs
        .lines()
        .slice(before)
        .filter((l) => l.msg === 'client closed the connection before the request was complete').length;
    while (gone() < 2 && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 20));
    const lines = idp.logs.lines().slice(before);
    assert.equal(gone(), 2, JSON.stringify(lines));
    assert.ok(!lines.some((l) => l.msg === 'database unavailable'), JSON.stringify(lines));
    assert.ok(!lines.some((l) => ((l.res as { statusCode?: number } | undefined)?.statusCode ?? 0) >= 500), JSON.stringify(lines));
    assert.ok(!lines.some((l) => (l.level as number) >= 50), JSON.stringify(lines));
  });

  it('PostgREST format: EMFILE and an exhausted pool are 503 PGRST001, never a 500', () => {
    for (const err of [emfile(), poolTimeout()]) {
      const { error } = toRestError(err, 'anon');
      assert.equal(error.status, 503, err.message);
      assert.equal(error.code, 'PGRST001');
      assert.ok(!JSON.stringify(error.toJSON()).includes('EMFILE'));
    }
  });

  it('GoTrue format: EMFILE and an exhausted pool are 503, never a 500', () => {
    for (const err of [emfile(), poolTimeout()]) {
      const error = unexpectedAuthError(quietRequest, err);
      assert.equal(error.status, 503, err.message);
      assert.equal(error.code, 'unexpected_failure');
      assert.ok(!error.message.includes('EMFILE'));
    }
  });
});
