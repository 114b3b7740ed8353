import assert from 'node:assert/strict';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { Type } from '@sinclair/typebox';
import { badRequest, HttpError, notFound } from '../src/kit/http/errors.js';
import { type App, buildHttpApp } from '../src/kit/http/app.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import { LogCapture } from './helpers/logs.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function withServer<T>(
  fn: (app: App, logs: LogCapture) => Promise<T>,
  opts: { ready?: () => Promise<void>; trustProxy?: string } = {},
): Promise<T> {
  const logs = new LogCapture();
  const app = await buildHttpApp({
    title: 'test',
    logLevel: 'info',
    logStream: logs,
    errorBody: statusEnvelope,
    readiness: opts.ready ?? (async () => {}),
    trustProxy: opts.trustProxy,
  });
  app.post(
    '/echo',
    {
      schema: {
        body: Type.Object({ name: Type.String({ minLength: 2 }), age: Type.Optional(Type.Integer()) }, { additionalProperties: false }),
        response: { 200: Type.Object({ name: Type.String(), age: Type.Optional(Type.Integer()) }) },
      },
    },
    async (request) => request.body,
  );
  app.get('/query', { schema: { querystring: Type.Object({ n: Type.Integer() }) } }, async (request) => ({ n: request.query.n }));
  app.get('/secrets', async (request) => {
    request.log.info(
      {
        password: 'hunter2-top',
        token: 'tok-top',
        access_token: 'at-top',
        refresh_token: 'rt-top',
        secret: 'secret-top',
        authorization: 'Bearer auth-top',
        user: { email: 'a@example.com', password: 'hunter2-nested', token: 'tok-nested' },
        session: { access_token: 'at-nested', refresh_token: 'rt-nested', authorization: 'Bearer auth-nested' },
        headers: { authorization: 'Bearer auth-headers', 'user-agent': 'test-agent' },
        req: { headers: { authorization: 'Bearer auth-req', cookie: 'sid=cookie-req', apikey: 'apikey-req' } },
      },
      'logging credentials',
    );
    return { ok: true };
  });
  app.get('/throws/http', async () => {
    throw new HttpError(409, 'Conflict on purpose', { 'x-extra': 'yes' });
  });
  app.get('/throws/bad', async () => {
    throw badRequest('bad on purpose');
  });
  app.get('/throws/missing', async () => {
    throw notFound('nothing here');
  });
  app.get('/throws/internal', async () => {
    throw new Error('secret internal detail at /srv/app.ts:42');
  });
  app.get('/throws/db-down', async () => {
    throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' });
  });
  app.get('/throws/sql', async () => {
    throw Object.assign(new Error('relation "users" does not exist'), { code: '42P01' });
  });
  app.get('/ip', async (request) => ({ ip: request.ip }));
  try {
    return await fn(app, logs);
  } finally {
    await app.close();
  }
}

describe('buildHttpApp: request ids', () => {
  it('generates a UUID request id and echoes it in x-request-id and the logs', async () => {
    await withServer(async (app, logs) => {
      const res = await app.inject({ method: 'GET', url: '/healthz' });
      const id = res.headers['x-request-id'];
      assert.match(String(id), UUID);
      const other = await app.inject({ method: 'GET', url: '/healthz' });
      assert.notEqual(other.headers['x-request-id'], id);
      // Every request log line carries the id (whatever its label).
      const lines = logs.lines().filter((l) => Object.values(l).includes(id));
      assert.ok(lines.some((l) => l.msg === 'request completed'));
    });
  });

  it('keeps a well-formed client id and replaces a forged one', async () => {
    await withServer(async (app, logs) => {
      const kept = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'trace-abc.123_XYZ' } });
      assert.equal(kept.headers['x-request-id'], 'trace-abc.123_XYZ');
      for (const forged of ['a b', '"},{"level":60', 'x'.repeat(65), '../../etc', 'id;drop', '']) {
        const res = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': forged } });
        assert.match(String(res.headers['x-request-id']), UUID, JSON.stringify(forged));
      }
      assert.ok(!logs.text().includes('"},{"level":60'));
      // Error responses carry the id too.
      const missing = await app.inject({ method: 'GET', url: '/nowhere', headers: { 'x-request-id': 'req-404' } });
      assert.equal(missing.headers['x-request-id'], 'req-404');
      const failed = await app.inject({ method: 'GET', url: '/throws/internal', headers: { 'x-request-id': 'req-500' } });
      assert.equal(failed.headers['x-request-id'], 'req-500');
    });
  });
});

describe('buildHttpApp: logs', () => {
  it('writes JSON lines and redacts authorization, passwords and tokens wherever they appear', async () => {
    await withServer(async (app, logs) => {
      const res = await app.inject({
        method: 'GET',
        url: '/secrets',
        headers: { authorization: 'Bearer header-secret', cookie: 'sid=cookie-secret' },
      });
      assert.equal(res.statusCode, 200);
      const text = logs.text();
      for (const line of text.trim().split('\n')) assert.doesNotThrow(() => JSON.parse(line), line);
      const entry = logs.lines().find((l) => l.msg === 'logging credentials');
      assert.ok(entry, 'the route log line is there');
      for (const leaked of [
        'hunter2',
        'tok-',
        'at-top',
        'at-nested',
        'rt-',
        'secret-top',
        'auth-top',
        'auth-nested',
        'auth-headers',
        'auth-req',
        'cookie-req',
        'apikey-req',
        'header-secret',
        'cookie-secret',
      ]) {
        assert.ok(!text.includes(leaked), `${leaked} leaked into the logs`);
      }
      // Redacted, not dropped: the keys stay so a reader sees something was there.
      assert.equal(entry.password, '[redacted]');
      assert.equal(entry.authorization, '[redacted]');
      assert.equal((entry.user as Record<string, unknown>).password, '[redacted]');
      assert.equal((entry.user as Record<string, unknown>).email, 'a@example.com');
      assert.equal((entry.headers as Record<string, unknown>)['user-agent'], 'test-agent');
      assert.equal(entry.level, 30);
      assert.equal(typeof entry.time, 'number');
      assert.ok(
        Object.values(entry).some((v) => typeof v === 'string' && UUID.test(v)),
        'the route line carries the request id',
      );
    });
  });

  it('logs an unexpected error for the operator but keeps it out of the response', async () => {
    await withServer(async (app, logs) => {
      const res = await app.inject({ method: 'GET', url: '/throws/internal' });
      assert.equal(res.statusCode, 500);
      assert.deepEqual(res.json(), { status: 500, response: 'Internal Server Error', message: 'Internal Server Error' });
      assert.ok(!res.body.includes('secret internal detail'));
      const logged = logs.lines().find((l) => l.msg === 'unhandled error');
      assert.ok(logged);
      assert.equal(logged.level, 50);
      assert.match(JSON.stringify(logged.err), /secret internal detail/);
    });
  });
});

describe('buildHttpApp: error envelope', () => {
  it('HttpError keeps its status, message and headers', async () => {
    await withServer(async (app) => {
      const res = await app.inject({ method: 'GET', url: '/throws/http' });
      assert.equal(res.statusCode, 409);
      assert.equal(res.headers['x-extra'], 'yes');
      assert.deepEqual(res.json(), { status: 409, response: 'Conflict', message: 'Conflict on purpose' });
      assert.deepEqual((await app.inject({ method: 'GET', url: '/throws/bad' })).json(), {
        status: 400,
        response: 'Bad Request',
        message: 'bad on purpose',
      });
      assert.deepEqual((await app.inject({ method: 'GET', url: '/throws/missing' })).json(), {
        status: 404,
        response: 'Not Found',
        message: 'nothing here',
      });
    });
  });

  it('schema validation gives 400 with the Ajv message; bodies are not coerced, query strings are', async () => {
    await withServer(async (app) => {
      const short = await app.inject({ method: 'POST', url: '/echo', payload: { name: 'x' } });
      assert.equal(short.statusCode, 400);
      assert.deepEqual(short.json(), { status: 400, response: 'Bad Request', message: 'body/name must NOT have fewer than 2 characters' });
      const wrongType = await app.inject({ method: 'POST', url: '/echo', payload: { name: 'ok', age: '42' } });
      assert.equal(wrongType.statusCode, 400);
      assert.match((wrongType.json() as { message: string }).message, /age must be integer/);
      const extra = await app.inject({ method: 'POST', url: '/echo', payload: { name: 'ok', admin: true } });
      assert.equal(extra.statusCode, 200);
      assert.deepEqual(extra.json(), { name: 'ok' });
      const query = await app.inject({ method: 'GET', url: '/query?n=5' });
      assert.deepEqual(query.json(), { n: 5 });
      const badQuery = await app.inject({ method: 'GET', url: '/query?n=five' });
      assert.equal(badQuery.statusCode, 400);
      assert.match((badQuery.json() as { message: string }).message, /querystring\/n must be integer/);
    });
  });

  it('client errors of the HTTP layer get the envelope: bad JSON 400, text/plain 415, too large 413, __proto__ 400', async () => {
    await withServer(async (app) => {
      const cases: Array<[{ method: 'POST'; url: string; headers: Record<string, string>; payload: string }, number, string]> = [
        [{ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{"name":' }, 400, 'Bad Request'],
        [{ method: 'POST', url: '/echo', headers: { 'content-type': 'text/plain' }, payload: 'name' }, 415, 'Unsupported Media Type'],
        [{ method: 'POST', url: '/echo', headers: { 'content-type': 'application/xml' }, payload: '<a/>' }, 415, 'Unsupported Media Type'],
        [
          {
            method: 'POST',
            url: '/echo',
            headers: { 'content-type': 'application/json' },
            payload: JSON.stringify({ name: 'x'.repeat(65 * 1024) }),
          },
          413,
          'Payload Too Large',
        ],
        [
          { method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{"name":"ok","__proto__":{"x":1}}' },
          400,
          'Bad Request',
        ],
      ];
      for (const [request, status, response] of cases) {
        const res = await app.inject(request);
        assert.equal(res.statusCode, status, JSON.stringify(request).slice(0, 120));
        const body = res.json() as Record<string, unknown>;
        assert.deepEqual(Object.keys(body).sort(), ['message', 'response', 'status']);
        assert.equal(body.status, status);
        assert.equal(body.response, response);
      }
    });
  });

  it('a refused JSON body is told what is wrong with it, and nothing is processed', async () => {
    await withServer(async (app) => {
      const cases: Array<[string, string]> = [
        ['{"name":"ok","__proto__":{"x":1}}', 'Body must not contain the key "__proto__"'],
        ['{"name":"ok","nested":[{"constructor":{"prototype":{"x":1}}}]}', 'Body must not contain the key "constructor.prototype"'],
        ['{"name":', 'Body is not valid JSON: '],
        ['', "Body cannot be empty when content-type is set to 'application/json'"],
        ['['.repeat(1001) + ']'.repeat(1001), 'Body nests deeper than 1000 levels'],
      ];
      for (const [payload, message] of cases) {
        const res = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload });
        assert.equal(res.statusCode, 400, payload.slice(0, 60));
        assert.ok((res.json() as { message: string }).message.startsWith(message), res.body);
      }
      // A key merely named constructor is ordinary data.
      const ok = await app.inject({
        method: 'POST',
        url: '/echo',
        headers: { 'content-type': 'application/json' },
        payload: '{"name":"constructor"}',
      });
      assert.equal(ok.statusCode, 200);
    });
  });

  it('a database that is unreachable gives 503 with Retry-After; other failures 500; neither leaks', async () => {
    await withServer(async (app) => {
      const down = await app.inject({ method: 'GET', url: '/throws/db-down' });
      assert.equal(down.statusCode, 503);
      assert.equal(down.headers['retry-after'], '1');
      assert.equal((down.json() as { response: string }).response, 'Service Unavailable');
      assert.ok(!down.body.includes('10.0.0.5'));
      const sql = await app.inject({ method: 'GET', url: '/throws/sql' });
      assert.equal(sql.statusCode, 500);
      assert.deepEqual(sql.json(), { status: 500, response: 'Internal Server Error', message: 'Internal Server Error' });
    });
  });

  it('unknown routes give a 404 envelope naming the route without its query string', async () => {
    await withServer(async (app) => {
      const res = await app.inject({ method: 'DELETE', url: '/nothing/here?token=abc' });
      assert.equal(res.statusCode, 404);
      assert.deepEqual(res.json(), { status: 404, response: 'Not Found', message: 'Route DELETE /nothing/here not found' });
    });
  });
});

describe('buildHttpApp: health, readiness, docs, proxies', () => {
  it('/healthz is 200; /readyz follows the readiness check and answers 503 JSON without the cause', async () => {
    let ready = true;
    await withServer(
      async (app) => {
        assert.deepEqual((await app.inject({ method: 'GET', url: '/healthz' })).json(), { status: 'ok' });
        const ok = await app.inject({ method: 'GET', url: '/readyz' });
        assert.equal(ok.statusCode, 200);
        assert.deepEqual(ok.json(), { status: 'ready' });
        ready = false;
        const down = await app.inject({ method: 'GET', url: '/readyz' });
        assert.equal(down.statusCode, 503);
        assert.match(String(down.headers['content-type']), /^application\/json/);
        assert.deepEqual(down.json(), { status: 503, response: 'Service Unavailable', message: 'Service not ready: database unreachable' });
        assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
      },
      {
        ready: async () => {
          if (!ready) throw new Error('connect ECONNREFUSED 10.1.1.1:5432');
        },
      },
    );
  });

  it('serves an OpenAPI document at /docs/json and the UI at /docs', async () => {
    await withServer(async (app) => {
      const res = await app.inject({ method: 'GET', url: '/docs/json' });
      assert.equal(res.statusCode, 200);
      const doc = res.json() as { openapi: string; info: { title: string }; paths: Record<string, unknown> };
      assert.match(doc.openapi, /^3\./);
      assert.equal(doc.info.title, 'test');
      assert.ok(doc.paths['/echo']);
      const ui = await app.inject({ method: 'GET', url: '/docs' });
      assert.ok(ui.statusCode === 200 || ui.statusCode === 302, String(ui.statusCode));
    });
  });

  it('believes X-Forwarded-For only from a trusted proxy', async () => {
    await withServer(async (app) => {
      const res = await app.inject({ method: 'GET', url: '/ip', remoteAddress: '127.0.0.1', headers: { 'x-forwarded-for': '192.0.2.1' } });
      assert.deepEqual(res.json(), { ip: '127.0.0.1' });
    });
    await withServer(
      async (app) => {
        const trusted = await app.inject({
          method: 'GET',
          url: '/ip',
          remoteAddress: '10.0.0.2',
          headers: { 'x-forwarded-for': '192.0.2.1' },
        });
        assert.deepEqual(trusted.json(), { ip: '192.0.2.1' });
        const untrusted = await app.inject({
          method: 'GET',
          url: '/ip',
          remoteAddress: '10.1.0.2',
          headers: { 'x-forwarded-for': '192.0.2.1' },
        });
        assert.deepEqual(untrusted.json(), { ip: '10.1.0.2' });
      },
      { trustProxy: '127.0.0.1, 10.0.0.0/24' },
    );
  });
});

describe('buildHttpApp: draining', () => {
  /** A listening app whose GET /slow stays in its handler until `release()`. */
  async function slowServer() {
    const app = await buildHttpApp({
      title: 'drain',
      logLevel: 'silent',
      logStream: new LogCapture(),
      errorBody: statusEnvelope,
      readiness: async () => {},
    });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inHandler = new Promise<void>((resolve) => (entered = resolve));
    app.get('/slow', async () => {
      entered();
      await gate;
      return { done: true };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { app, port: (app.server.address() as AddressInfo).port, inHandler, release };
  }

  it('a keep-alive connection whose request is in flight at close is closed after its response', async () => {
    const { app, port, inHandler, release } = await slowServer();
    const response = fetch(`http://127.0.0.1:${port}/slow`);
    await inHandler;
    const closed = app.close();
    await new Promise((r) => setTimeout(r, 50));
    release();
    const res = await response;
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('connection'), 'close');
    assert.deepEqual(await res.json(), { done: true });
    // Without the close, the client's pooled keep-alive connection would hold this for the idle timeout (72 s).
    const started = Date.now();
    await closed;
    // A bound with a busy machine's slack, far below the 72 s the pooled connection would hold.
    assert.ok(Date.now() - started < 10_000, `close took ${Date.now() - started} ms`);
  });

  it('connections that never send a request, or stop inside their headers, do not hold the drain; a request in flight is still served', async () => {
    const { app, port, inHandler, release } = await slowServer();
    // A browser's preconnect (nothing sent) and a half-sent header section: neither is a request
    // in flight. Before, Node's close() left both open and the drain never ended.
    const silent = net.connect(port, '127.0.0.1');
    const halfway = net.connect(port, '127.0.0.1', () => halfway.write('GET /slow HTTP/1.1\r\nHost: x\r\n'));
    const closedAt = (socket: net.Socket) => {
      socket.on('error', () => {});
      return new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
    };
    const silentClosed = closedAt(silent);
    const halfwayClosed = closedAt(halfway);
    await Promise.all([once(silent, 'connect'), once(halfway, 'connect')]);
    const response = fetch(`http://127.0.0.1:${port}/slow`);
    await inHandler;
    const started = Date.now();
    let closedAfter: number | undefined;
    const closed = app.close().then(() => (closedAfter = Date.now() - started));
    // Both unused connections end while the request is still in its handler.
    await Promise.all([silentClosed, halfwayClosed]);
    assert.equal(closedAfter, undefined, 'the drain waited for the request in flight');
    release();
    const res = await response;
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { done: true });
    await closed;
    assert.ok(closedAfter! < 10_000, `close took ${closedAfter} ms`);
  });
});

describe('answers Fastify and the HTTP parser give before routing, in the envelope', () => {
  it('an undecodable %-escape in the path is a 400 envelope', async () => {
    await withServer(async (app) => {
      app.get('/item/:id', async () => ({ ok: true }));
      const res = await app.inject({ method: 'GET', url: '/item/%zz' });
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json(), { status: 400, response: 'Bad Request', message: 'Malformed URL' });
    });
  });

  it('a non-finite number in a query string is a 400, never passed to the handler', async () => {
    await withServer(async (app) => {
      for (const n of ['1e400', '-1e400']) {
        const res = await app.inject({ method: 'GET', url: `/query?n=${n}` });
        assert.equal(res.statusCode, 400, n);
        assert.deepEqual(res.json(), { status: 400, response: 'Bad Request', message: 'querystring/n must be a finite number' });
      }
      const fine = await app.inject({ method: 'GET', url: '/query?n=42' });
      assert.deepEqual(fine.json(), { n: 42 });
      const wrong = await app.inject({ method: 'GET', url: '/query?n=abc' });
      assert.equal(wrong.statusCode, 400);
      assert.match(wrong.json().message, /querystring\/n must be integer/);
    });
  });

  it('a request the HTTP parser refuses gets the envelope and Connection: close', async () => {
    const net = await import('node:net');
    await withServer(async (app) => {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as AddressInfo;
      const answer: string = await new Promise((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => {
          socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n{}');
        });
        let text = '';
        socket.on('data', (d) => (text += d.toString()));
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
      });
      const [head, body] = answer.split('\r\n\r\n');
      assert.match(head!, /^HTTP\/1\.1 400 Bad Request/);
      assert.match(head!, /\r\nConnection: close/i);
      assert.deepEqual(JSON.parse(body!), { status: 400, response: 'Bad Request', message: 'Bad Request' });
    });
  });
});

describe('access lines', () => {
  async function accessLines(level: 'info' | 'warn', clientAddresses = true) {
    const logs = new LogCapture();
    const app = await buildHttpApp({
      title: 'test',
      logLevel: level,
      logStream: logs,
      logClientAddresses: clientAddresses,
      errorBody: statusEnvelope,
      readiness: async () => {},
    });
    app.get('/go', async (_request, reply) => reply.code(302).header('location', '/there').send());
    const answer = await app.inject({
      method: 'GET',
      url: '/go?apikey=sb_secret_abc&page=2',
      headers: { 'x-request-id': 'go-1', authorization: 'Bearer eyJ.secret.sig' },
      remoteAddress: '198.51.100.7',
    });
    await app.close();
    assert.equal(answer.statusCode, 302);
    return logs.lines().filter((l) => l.reqId === 'go-1');
  }

  it('writes one line a request at info, when it is answered: method, redacted URL, host, client, status, time', async () => {
    const lines = await accessLines('info');
    assert.equal(lines.length, 1, JSON.stringify(lines));
    const [line] = lines;
    assert.equal(line!.level, 30);
    assert.equal(line!.msg, 'request completed');
    assert.deepEqual(Object.keys(line!).slice(0, 5), ['level', 'time', 'pid', 'hostname', 'reqId']);
    // (inject's requests have no remote port, so the line has none.)
    assert.deepEqual(line!.req, {
      method: 'GET',
      url: '/go?apikey=[redacted]&page=2',
      host: 'localhost:80',
      remoteAddress: '198.51.100.7',
    });
    assert.deepEqual(line!.res, { statusCode: 302 });
    assert.equal(typeof line!.responseTime, 'number');
    assert.doesNotMatch(JSON.stringify(line), /sb_secret_abc|eyJ|authorization/i);
  });

  it('leaves the client out where the service asks it to, and writes nothing at warn', async () => {
    const [line] = await accessLines('info', false);
    assert.deepEqual(Object.keys(line!.req as object), ['method', 'url', 'host']);
    assert.deepEqual(await accessLines('warn'), []);
  });
});

describe('request loggers', () => {
  // A request's child logger is made on its first written line: each line still carries the request id,
  // and the lines below the level are dropped as before.
  async function logLines(level: 'info' | 'warn') {
    const logs = new LogCapture();
    const app = await buildHttpApp({
      title: 'test',
      logLevel: level,
      logStream: logs,
      errorBody: statusEnvelope,
      readiness: async () => {},
    });
    app.get('/talk', async (request) => {
      request.log.debug('debug line');
      request.log.info({ event: 'said' }, 'info line');
      request.log.warn({ event: 'warned' }, 'warn line');
      request.log.child({ part: 'inner' }).error('child line');
      return { ok: true };
    });
    app.get('/chatty', { logLevel: 'debug' }, async (request) => {
      request.log.debug('route debug line');
      return { ok: true };
    });
    const talk = await app.inject({ method: 'GET', url: '/talk', headers: { 'x-request-id': `talk-${level}` } });
    const chatty = await app.inject({ method: 'GET', url: '/chatty', headers: { 'x-request-id': `chatty-${level}` } });
    await app.close();
    assert.equal(talk.statusCode, 200);
    assert.equal(chatty.statusCode, 200);
    return logs.lines().filter((l) => typeof l.reqId === 'string');
  }

  it('writes the lines at or above the level, each with its request id', async () => {
    const warn = await logLines('warn');
    assert.deepEqual(
      warn.map((l) => [l.reqId, l.level, l.msg]),
      [
        ['talk-warn', 40, 'warn line'],
        ['talk-warn', 50, 'child line'],
        ['chatty-warn', 20, 'incoming request'],
        ['chatty-warn', 20, 'route debug line'],
        ['chatty-warn', 30, 'request completed'],
      ],
    );
    // A route with its own level (debug here) logs at that level, request lines included (the
    // incoming line is a debug line, the access line an info line).
    assert.equal(warn[0]!.event, 'warned');
    assert.equal(warn[1]!.part, 'inner');
    for (const line of warn) assert.deepEqual(Object.keys(line).slice(0, 5), ['level', 'time', 'pid', 'hostname', 'reqId']);

    const info = await logLines('info');
    const talk = info.filter((l) => l.reqId === 'talk-info').map((l) => l.msg);
    assert.deepEqual(talk, ['info line', 'warn line', 'child line', 'request completed']);
    const chatty = info.filter((l) => l.reqId === 'chatty-info').map((l) => l.msg);
    assert.deepEqual(chatty, ['incoming request', 'route debug line', 'request completed']);
  });
});
