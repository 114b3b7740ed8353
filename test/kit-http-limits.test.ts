// Deadlines, the connection cap and the classification of failures that are
// nobody's bug (a client gone mid-body, a database out of reach, a pool with
// no free connection, a process out of file descriptors), on buildHttpApp
// listening on real sockets, with real PostgreSQL pools.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import { Type } from '@sinclair/typebox';
import { classifyError, descriptorsExhaustedRecently } from '../src/kit/http/classify-error.js';
import { createPool, isDatabaseUnavailable, type Pool } from '../src/kit/db.js';
import { watchRequestStream } from '../src/kit/http/request-stream.js';
import { type App, buildHttpApp } from '../src/kit/http/app.js';
import { OVERSIZED_BODY_DISCARD_BYTES } from '../src/kit/http/oversized-body.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import type { HttpSettings } from '../src/kit/http/limits.js';
import { adminUrl } from './helpers/database.js';
import { LogCapture, testLogLevel } from './helpers/logs.js';
import { freePort } from './helpers/ports.js';

const pools: Pool[] = [];
after(async () => {
  await Promise.all(pools.map((p) => p.end().catch(() => {})));
});

async function listening(http: HttpSettings, routes: (app: App) => void = () => {}, trustProxy?: string) {
  const logs = new LogCapture();
  const app = await buildHttpApp({
    title: 'limits',
    logLevel: testLogLevel('info'),
    logStream: logs,
    errorBody: statusEnvelope,
    readiness: async () => {},
    http,
    trustProxy,
  });
  app.post('/echo', { schema: { body: Type.Object({ name: Type.String() }) } }, async (request) => request.body);
  routes(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { app, logs, port, url: `http://127.0.0.1:${port}` };
}

/** Sends `text` on a raw connection and resolves with everything received once the server closes it. */
function rawExchange(port: number, text: string, timeoutMs = 20_000): Promise<{ answer: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    let answer = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within ${timeoutMs} ms; received: ${answer}`));
    }, timeoutMs);
    socket.on('data', (d) => (answer += d.toString()));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ answer, closedAfterMs: performance.now() - started });
    });
  });
}

function parseRaw(answer: string): { status: number; head: string; body: unknown } {
  const [head, body] = answer.split('\r\n\r\n');
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head!)?.[1]), head: head!, body: body ? JSON.parse(body) : undefined };
}

/** A connection that is open (and counted by the server) once this resolves; from `from` (a loopback address) when given. */
function openConnection(port: number, from?: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress: from }, () => resolve(socket));
    socket.on('error', reject);
  });
}

/** One request on a fresh connection from `from`, answered or closed. */
function exchangeFrom(port: number, from: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress: from }, () => socket.write(text));
    let answer = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within 20 s: ${answer}`));
    }, 20_000);
    socket.on('data', (d) => (answer += d.toString()));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answer);
    });
  });
}

const waitFor = async (check: () => boolean, what: string, ms = 10_000) => {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('request deadlines', () => {
  it('a body that stalls gets a 408 envelope at the request deadline and its connection is closed', async () => {
    const { app, logs, port } = await listening({ headersTimeoutMs: 1000, requestTimeoutMs: 1000 });
    try {
      const { answer } = await rawExchange(
        port,
        'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":',
      );
      const { status, head, body } = parseRaw(answer);
      assert.equal(status, 408, answer);
      assert.match(head, /\r\nConnection: close/i);
      assert.deepEqual(body, { status: 408, response: 'Request Timeout', message: 'Request Timeout' });
      // The stream the handler was reading fails as the connection closes: the client's doing, not the database's.
      await waitFor(() => logs.text().includes('client closed the connection before the request was complete'), 'the aborted request');
      assert.ok(!logs.text().includes('database unavailable'), logs.text());
      assert.ok(!logs.lines().some((l) => (l.level as number) >= 50), logs.text());
    } finally {
      await app.close();
    }
  });

  it('a header section that never ends gets a 408 envelope at the header deadline', async () => {
    const { app, port } = await listening({ headersTimeoutMs: 1000, requestTimeoutMs: 5000 });
    try {
      const { answer } = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      assert.equal(parseRaw(answer).status, 408, answer);
    } finally {
      await app.close();
    }
  });

  it('a request in time is served; a slow handler is not cut by the request deadline', async () => {
    const { app, url } = await listening({ headersTimeoutMs: 1000, requestTimeoutMs: 1000 }, (a) =>
      a.get('/slow', async () => {
        await new Promise((r) => setTimeout(r, 2500));
        return { done: true };
      }),
    );
    try {
      const res = await fetch(`${url}/slow`);
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { done: true });
    } finally {
      await app.close();
    }
  });
});

describe('connection cap', () => {
  it('over the cap: a 503 envelope with Retry-After and the connection closed; /readyz 503 at the cap; served again below it', async () => {
    const { app, logs, port, url } = await listening({ maxConnections: 3, maxConnectionsPerClient: 3 });
    const held: net.Socket[] = [];
    try {
      held.push(await openConnection(port), await openConnection(port));
      // The probe's own connection is the third: the process is at its cap.
      const atCap = await rawExchange(port, 'GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      const ready = parseRaw(atCap.answer);
      assert.equal(ready.status, 503, atCap.answer);
      assert.deepEqual(ready.body, { status: 503, response: 'Service Unavailable', message: 'Service not ready: at its connection limit' });
      assert.ok(logs.text().includes('at its connection limit'));

      held.push(await openConnection(port));
      const over = await rawExchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      const refused = parseRaw(over.answer);
      assert.equal(refused.status, 503, over.answer);
      assert.match(refused.head, /\r\nRetry-After: 1\r\n/i);
      assert.match(refused.head, /\r\nConnection: close/i);
      assert.deepEqual(refused.body, { status: 503, response: 'Service Unavailable', message: 'Too many connections, try again shortly' });

      // Below the cap once the server has seen the held connections close.
      for (const socket of held.splice(0)) socket.destroy();
      let readyAgain: Response | undefined;
      for (let i = 0; i < 100 && readyAgain?.status !== 200; i++) {
        readyAgain = await fetch(`${url}/readyz`, { headers: { connection: 'close' } });
        if (readyAgain.status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(readyAgain?.status, 200);
      assert.equal((await fetch(`${url}/healthz`, { headers: { connection: 'close' } })).status, 200);
    } finally {
      for (const socket of held) socket.destroy();
      await app.close();
    }
  });
});

describe('connections per client', () => {
  const GET_HEALTH = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';

  it('one client holds at most its share (a quarter of the cap by default): its next connection gets a 503, another client is served', async () => {
    const { app, port } = await listening({ maxConnections: 8 });
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < 2; i++) held.push(await openConnection(port, '127.0.0.5'));
      const refused = parseRaw(await exchangeFrom(port, '127.0.0.5', GET_HEALTH));
      assert.equal(refused.status, 503);
      assert.deepEqual(refused.body, { status: 503, response: 'Service Unavailable', message: 'Too many connections, try again shortly' });
      assert.equal(parseRaw(await exchangeFrom(port, '127.0.0.6', GET_HEALTH)).status, 200, 'another client is served');
      // Its share comes back as its connections close.
      for (const socket of held.splice(0)) socket.destroy();
      let status = 0;
      for (let i = 0; i < 100 && status !== 200; i++) {
        status = parseRaw(await exchangeFrom(port, '127.0.0.5', GET_HEALTH)).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(status, 200);
    } finally {
      for (const socket of held) socket.destroy();
      await app.close();
    }
  });

  it('a proxy named in TRUST_PROXY carries many clients: it is held only to the overall cap', async () => {
    const { app, port } = await listening({ maxConnections: 8, maxConnectionsPerClient: 1 }, () => {}, '127.0.0.7/32');
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < 3; i++) held.push(await openConnection(port, '127.0.0.7'));
      assert.equal(parseRaw(await exchangeFrom(port, '127.0.0.7', GET_HEALTH)).status, 200);
      held.push(await openConnection(port, '127.0.0.8'));
      assert.equal(parseRaw(await exchangeFrom(port, '127.0.0.8', GET_HEALTH)).status, 503, 'anyone else keeps its limit of 1');
    } finally {
      for (const socket of held) socket.destroy();
      await app.close();
    }
  });
});

describe('the body deadline of a request without credentials', () => {
  const STALLED = 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n';

  it('a stalled body without credentials gets a 408 at HTTP_PUBLIC_BODY_TIMEOUT_MS, long before the request deadline', async () => {
    const { app, port } = await listening({ requestTimeoutMs: 60_000, headersTimeoutMs: 10_000, publicBodyTimeoutMs: 1000 });
    try {
      const { answer, closedAfterMs } = await rawExchange(port, `${STALLED}\r\n{"name":`);
      const { status, body } = parseRaw(answer);
      assert.equal(status, 408, answer);
      assert.deepEqual(body, { status: 408, response: 'Request Timeout', message: 'Request body not received in time' });
      assert.ok(closedAfterMs < 10_000, `closed after ${closedAfterMs} ms`);
    } finally {
      await app.close();
    }
  });

  it('a stalled chunked body (no Content-Length) is cut at the same deadline', async () => {
    const { app, port } = await listening({ requestTimeoutMs: 60_000, headersTimeoutMs: 10_000, publicBodyTimeoutMs: 1000 });
    try {
      const chunked =
        'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n{"name":\r\n';
      const { answer, closedAfterMs } = await rawExchange(port, chunked);
      assert.equal(parseRaw(answer).status, 408, answer);
      assert.ok(closedAfterMs < 10_000, `closed after ${closedAfterMs} ms`);
    } finally {
      await app.close();
    }
  });

  it('with credentials the body keeps the whole request deadline; a body in time is served either way', async () => {
    const { app, port, url } = await listening({ requestTimeoutMs: 60_000, headersTimeoutMs: 10_000, publicBodyTimeoutMs: 1000 });
    try {
      const socket = await openConnection(port);
      let answer = '';
      socket.on('data', (d) => (answer += d.toString()));
      socket.write(`${STALLED}Authorization: Bearer x\r\n\r\n{"name":`);
      await new Promise((r) => setTimeout(r, 2500));
      assert.equal(answer, '', 'not cut at the public deadline');
      assert.equal(socket.destroyed, false);
      socket.destroy();
      const res = await fetch(`${url}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"a"}' });
      assert.equal(res.status, 200);
    } finally {
      await app.close();
    }
  });
});

describe('a body over the limit', () => {
  /** Resolves with what the connection received once `done` says it holds all that is awaited. */
  function received(socket: net.Socket, done: (text: string) => boolean): Promise<string> {
    return new Promise((resolve, reject) => {
      let text = '';
      const timer = setTimeout(() => reject(new Error(`waited 20 s; received: ${text}`)), 20_000);
      const finish = (error?: Error) => {
        clearTimeout(timer);
        socket.off('data', onData);
        if (error) reject(error);
        else resolve(text);
      };
      const onData = (d: Buffer) => {
        text += d.toString('latin1');
        if (done(text)) finish();
      };
      socket.on('data', onData);
      socket.once('error', (err) => finish(err));
      socket.once('close', () => (done(text) ? finish() : finish(new Error(`closed; received: ${text}`))));
    });
  }
  const oneResponse = (text: string) => {
    const head = text.indexOf('\r\n\r\n');
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1]);
    return head >= 0 && text.length >= head + 4 + length;
  };

  it('413 in the envelope, and the client can write the rest of its body and read the answer: the connection is not reset under it', async () => {
    const { app, port } = await listening({});
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    try {
      await new Promise((resolve) => socket.once('connect', resolve));
      const body = `{"name":"${'x'.repeat(1_100_000)}"}`;
      socket.write(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
      // The refusal comes before a byte of the body is sent...
      const refusal = parseRaw(await received(socket, oneResponse));
      assert.equal(refusal.status, 413);
      assert.deepEqual(refusal.body, { status: 413, response: 'Payload Too Large', message: 'Request body is too large' });
      assert.doesNotMatch(refusal.head, /\r\nconnection: close/i);
      // ...and the body the client was already committed to still goes through (closing under it
      // would reset the connection: a broken pipe here, and the 413 lost for a slower reader),
      // after which the same connection serves the next request.
      const next = received(socket, oneResponse);
      await new Promise<void>((resolve, reject) => socket.write(body, (err) => (err ? reject(err) : resolve())));
      socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{"name":"next"}');
      const answer = parseRaw(await next);
      assert.equal(answer.status, 200);
      assert.deepEqual(answer.body, { name: 'next' });
    } finally {
      socket.destroy();
      await app.close();
    }
  });

  it(`over ${OVERSIZED_BODY_DISCARD_BYTES} declared bytes, or without a declared length, the 413 closes the connection: nothing more is read`, async () => {
    const { app, port } = await listening({});
    try {
      const huge = await rawExchange(
        port,
        `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${OVERSIZED_BODY_DISCARD_BYTES + 1}\r\n\r\n{"name":"`,
      );
      assert.equal(parseRaw(huge.answer).status, 413, huge.answer);
      assert.match(parseRaw(huge.answer).head, /\r\nconnection: close/i);
      const chunk = `{"name":"${'x'.repeat(70_000)}"}`;
      const chunked = await rawExchange(
        port,
        `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n`,
      );
      assert.equal(parseRaw(chunked.answer).status, 413, chunked.answer);
      assert.match(parseRaw(chunked.answer).head, /\r\nconnection: close/i);
    } finally {
      await app.close();
    }
  });
});

describe('failures classified by their origin: 503 for outages, never 500, never an outage for a client', () => {
  it('a client that aborts mid-body: no "database unavailable", no 5xx', async () => {
    const { app, logs, port } = await listening({});
    try {
      await new Promise<void>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => {
          socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":"abc');
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 100);
        });
        socket.on('error', () => {});
      });
      await waitFor(() => logs.text().includes('client closed the connection before the request was complete'), 'the aborted request');
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(!logs.text().includes('database unavailable'), logs.text());
      const statuses = logs
        .lines()
        .flatMap((l) => ((l.res as { statusCode?: number } | undefined)?.statusCode ? [(l.res as { statusCode: number }).statusCode] : []));
      assert.ok(
        statuses.every((s) => s < 500),
        `statuses logged: ${statuses}`,
      );
      assert.ok(!logs.lines().some((l) => (l.level as number) >= 50), logs.text());
    } finally {
      await app.close();
    }
  });

  it('a real PostgreSQL connection error is a 503 with Retry-After', async () => {
    const closedPort = await freePort();
    const unreachable = createPool(`postgres://postgres@127.0.0.1:${closedPort}/postgres`, { max: 1, connectionTimeoutMillis: 1000 });
    pools.push(unreachable);
    const { app, logs, url } = await listening({}, (a) => a.get('/db', async () => (await unreachable.query('SELECT 1 AS one')).rows));
    try {
      const res = await fetch(`${url}/db`);
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
      assert.deepEqual(await res.json(), {
        status: 503,
        response: 'Service Unavailable',
        message: 'Service temporarily unavailable, try again shortly',
      });
      assert.ok(logs.text().includes('database unavailable'));
    } finally {
      await app.close();
    }
  });

  it('a pool with no free connection (all held, connection timeout reached) is a 503, not a 500', async () => {
    const pool = createPool(adminUrl(), { max: 1, connectionTimeoutMillis: 300 });
    pools.push(pool);
    const { app, url } = await listening({}, (a) => {
      a.get('/hold', async () => (await pool.query('SELECT pg_sleep(2) AS slept')).rowCount);
      a.get('/db', async () => (await pool.query('SELECT 1 AS one')).rows);
    });
    try {
      const holding = fetch(`${url}/hold`);
      await new Promise((r) => setTimeout(r, 300));
      const res = await fetch(`${url}/db`);
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
      assert.equal((await holding).status, 200);
    } finally {
      await app.close();
    }
  });

  it('classifyError: EMFILE/ENFILE and pool timeouts are outages; request-stream errors are the client; SQL errors internal', () => {
    // The error shapes node and node-postgres produce (the real ones are in the resilience suite).
    const emfile = Object.assign(new Error('connect EMFILE 127.0.0.1:5432 - Local (undefined:undefined)'), {
      code: 'EMFILE',
      errno: -24,
      syscall: 'connect',
    });
    const enfile = Object.assign(new Error('open ENFILE'), { code: 'ENFILE', syscall: 'open' });
    assert.deepEqual(classifyError(emfile), { kind: 'unavailable', cause: 'file-descriptors' });
    assert.deepEqual(classifyError(enfile), { kind: 'unavailable', cause: 'file-descriptors' });
    assert.deepEqual(classifyError(new Error('timeout exceeded when trying to connect')), { kind: 'unavailable', cause: 'database' });
    assert.deepEqual(classifyError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' })), {
      kind: 'unavailable',
      cause: 'database',
    });
    assert.deepEqual(classifyError(Object.assign(new Error('too big'), { statusCode: 413 })), { kind: 'client-error', status: 413 });
    // The same ECONNRESET, emitted by a request's own stream, is the client's: by origin, not by code.
    const request = new PassThrough() as unknown as IncomingMessage;
    watchRequestStream(request);
    const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    request.emit('error', aborted);
    assert.deepEqual(classifyError(aborted), { kind: 'client-gone' });
    assert.equal(isDatabaseUnavailable(aborted), false);
    assert.equal(isDatabaseUnavailable(Object.assign(new Error('aborted'), { code: 'ECONNRESET' })), true);
    assert.deepEqual(classifyError(Object.assign(new Error('relation "x" does not exist'), { code: '42P01' })), { kind: 'internal' });
  });

  it('EMFILE in a handler: 503 with Retry-After, and /readyz reports it', async () => {
    const { app, logs, url } = await listening({}, (a) =>
      a.get('/connect', async () => {
        throw Object.assign(new Error('connect EMFILE 127.0.0.1:5432 - Local (undefined:undefined)'), {
          code: 'EMFILE',
          errno: -24,
          syscall: 'connect',
        });
      }),
    );
    try {
      const res = await fetch(`${url}/connect`);
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
      assert.ok(!(await res.text()).includes('EMFILE'));
      assert.ok(logs.text().includes('out of file descriptors'));
      assert.ok(descriptorsExhaustedRecently());
      const ready = await fetch(`${url}/readyz`);
      assert.equal(ready.status, 503);
      assert.deepEqual(await ready.json(), {
        status: 503,
        response: 'Service Unavailable',
        message: 'Service not ready: out of file descriptors',
      });
    } finally {
      await app.close();
    }
  });
});
