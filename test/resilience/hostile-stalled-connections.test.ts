// 1,100 connections that send a request's headers (or part of them) and then
// nothing, against a shortener whose process may open 1,024 files. Without
// header and body deadlines such connections are held forever; without a
// connection cap below the open-file limit they take every descriptor, and the
// next connection to PostgreSQL fails with EMFILE (creates and redirects
// answered 500 while /healthz still said 200). Here: every stalled connection
// is answered (408 at its deadline, or 503 when over the cap) and closed; the
// traffic during the attack gets its answer or a 503, never a 500 (a fresh
// connection made while the server is over its cap may be closed at once, as a
// stalled one is); afterwards the same process serves normally.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { DESCRIPTORS_KEPT_FREE, REFUSALS_IN_FLIGHT } from '../../src/kit/http/limits.js';
import { createLink } from './helpers/api.js';
import { reportFigures, round } from './helpers/figures.js';
import { jsonOf, keepAliveAgent, type Outcome, send, sleep, waitUntil } from './helpers/http.js';
import { ensureStopped, startShortener } from './helpers/services.js';
import { clientIps } from '../helpers/client-ips.js';
import { shortenerDatabase } from '../helpers/shortener.js';

const STALLED = 1100;
const OPEN_FILE_LIMIT = 1024;
const HEADERS_TIMEOUT_MS = 2000;
const REQUEST_TIMEOUT_MS = 3000;
/** Slack on top of a deadline for the server's periodic check and a busy shared machine. */
const CLOSE_SLACK_MS = 15_000;

let db: TestDatabase;
let shortener: ServiceProcess | undefined;

before(async () => {
  db = await shortenerDatabase();
});

after(async () => {
  await ensureStopped(shortener);
  await db.drop();
});

interface Stalled {
  socket: net.Socket;
  /** `headers`: an unfinished header section; `body`: complete headers, a body announced and never sent. */
  kind: 'headers' | 'body';
  connectedAt?: number;
  closedAt?: number;
  received: string;
}

function openFileLimitOfThisProcess(): number {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const soft = line?.split(/\s+/)[3];
  return soft === 'unlimited' ? Number.POSITIVE_INFINITY : Number(soft);
}

const descriptorsOf = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

/** `from` (through the trusted proxy) gives each connection its own create limit, so its body is waited for. */
function stall(port: number, kind: Stalled['kind'], from: string): Stalled {
  const entry: Stalled = { socket: net.connect(port, '127.0.0.1'), kind, received: '' };
  entry.socket.on('connect', () => {
    entry.connectedAt = performance.now();
    entry.socket.write(
      kind === 'body'
        ? `POST /api/links HTTP/1.1\r\nHost: sho.rt\r\nX-Forwarded-For: ${from}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"url":`
        : 'GET /healthz HTTP/1.1\r\nHost: sho.rt\r\nX-Slow: ',
    );
  });
  entry.socket.on('data', (d: Buffer) => (entry.received += d.toString('latin1')));
  entry.socket.on('error', () => {});
  entry.socket.on('close', () => (entry.closedAt = performance.now()));
  return entry;
}

/** The status of the raw HTTP answer a stalled connection got, and whether its body is the envelope. */
function answerOf(raw: string): { status: number | null; envelope: boolean } {
  const match = /^HTTP\/1\.1 (\d{3}) /.exec(raw);
  if (!match) return { status: null, envelope: false };
  const body = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  try {
    const parsed = JSON.parse(body) as Record<string, unknown>;
    return { status: Number(match[1]), envelope: parsed.status === Number(match[1]) && typeof parsed.message === 'string' };
  } catch {
    return { status: Number(match[1]), envelope: false };
  }
}

test('1,100 stalled connections under ulimit -n 1024: each answered and closed by its deadline, traffic never 500, recovery without restart', async (t) => {
  if (openFileLimitOfThisProcess() < STALLED + 400) {
    const reason = `the test process needs an open-file limit above ${STALLED + 400} (ulimit -n) to open ${STALLED} connections`;
    // CI must run it: a skip there would hide the attack this test replays.
    if (process.env.CI) assert.fail(reason);
    t.skip(reason);
    return;
  }
  shortener = await startShortener(db.url, {
    trustProxy: '127.0.0.1',
    openFileLimit: OPEN_FILE_LIMIT,
    env: { HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS), HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) },
  });
  const pid = shortener.child.pid!;
  const target = { url: shortener.url, agent: false as const };
  const ip = clientIps();
  const codes: string[] = [];
  for (let i = 0; i < 5; i++) codes.push(await createLink(target, ip(i)));
  // Clients already connected when the attack starts (a proxy's pooled connections): their
  // requests reach the handlers, which then need database connections, hence descriptors.
  const pooled = { url: shortener.url, agent: keepAliveAgent(8) };
  await Promise.all(Array.from({ length: 8 }, () => send(pooled, { path: '/healthz' })));
  const descriptorsAtRest = descriptorsOf(pid);

  // The attack, and ordinary traffic on fresh connections while it lasts.
  const attackStarted = performance.now();
  const stalled = Array.from({ length: STALLED }, (_, i) => stall(shortener!.port, i % 2 === 0 ? 'body' : 'headers', ip(10_000 + i)));
  const allClosed = () => stalled.every((s) => s.closedAt !== undefined);
  let peakDescriptors = 0;
  const sampler = setInterval(() => {
    try {
      peakDescriptors = Math.max(peakDescriptors, descriptorsOf(pid));
    } catch {
      // the process is gone; the assertions below say so
    }
  }, 100);

  const during: Record<string, number> = {};
  const unexpected: string[] = [];
  const readyDuring: Record<string, number> = {};
  const cap = OPEN_FILE_LIMIT - DESCRIPTORS_KEPT_FREE;
  // This process sees a stalled connection closed no sooner than the server closed it,
  // so fewer than `cap` open here means the server was below its cap too.
  const stalledOpen = () => stalled.filter((s) => s.closedAt === undefined).length;
  let resetWhileFull = 0;
  /** `openWhenSent`: for a fresh connection, the stalled connections still open when it was made. */
  const check = (what: string, outcome: Outcome, expected: number[], openWhenSent?: number) => {
    const key = outcome.ok ? String(outcome.status) : outcome.error;
    during[`${what} ${key}`] = (during[`${what} ${key}`] ?? 0) + 1;
    // Over the cap with REFUSALS_IN_FLIGHT refusals open, the server closes a new connection
    // at once, as it does a stalled one (asserted below); a pooled request is always answered.
    if (!outcome.ok && outcome.error === 'ECONNRESET' && openWhenSent !== undefined && openWhenSent >= cap - 8) {
      resetWhileFull += 1;
      return;
    }
    if (!outcome.ok || !expected.includes(outcome.status))
      unexpected.push(
        `${what}: ${outcome.ok ? `${outcome.status} ${outcome.text}` : `${outcome.error} (${openWhenSent ?? 'pooled'} stalled open)`}`,
      );
    else if (outcome.status === 503) {
      const body = jsonOf(outcome) as Record<string, unknown> | undefined;
      if (body?.status !== 503 || outcome.headers['retry-after'] === undefined)
        unexpected.push(`${what}: 503 without envelope or Retry-After: ${outcome.text}`);
    }
  };
  let n = 100;
  const pooledTraffic = (async () => {
    while (!allClosed() && performance.now() - attackStarted < REQUEST_TIMEOUT_MS + CLOSE_SLACK_MS) {
      const burst = await Promise.all(
        Array.from({ length: 8 }, (_, j) =>
          send(
            pooled,
            {
              method: 'POST',
              path: '/api/links',
              json: { url: `https://example.com/pooled/${n}` },
              headers: { 'x-forwarded-for': ip(50_000 + n++ + j) },
            },
            20_000,
          ),
        ),
      );
      for (const outcome of burst) check('pooled create', outcome, [201, 503]);
      await sleep(50);
    }
  })();
  const traffic = (async () => {
    while (!allClosed() && performance.now() - attackStarted < REQUEST_TIMEOUT_MS + CLOSE_SLACK_MS) {
      const i = n++;
      const openWhenSent = stalledOpen();
      const [what, outcome] =
        i % 3 === 0
          ? [
              'create',
              await send(
                target,
                {
                  method: 'POST',
                  path: '/api/links',
                  json: { url: `https://example.com/during/${i}` },
                  headers: { 'x-forwarded-for': ip(i) },
                },
                20_000,
              ),
            ]
          : i % 3 === 1
            ? ['redirect', await send(target, { path: `/${codes[i % codes.length]}` }, 20_000)]
            : ['readyz', await send(target, { path: '/readyz' }, 20_000)];
      if (what === 'readyz') {
        const key = outcome.ok ? String(outcome.status) : outcome.error;
        readyDuring[key] = (readyDuring[key] ?? 0) + 1;
      }
      check(what, outcome, what === 'create' ? [201, 503] : what === 'redirect' ? [302, 503] : [200, 503], openWhenSent);
      await sleep(20);
    }
  })();

  const closedWithin = await waitUntil(allClosed, REQUEST_TIMEOUT_MS + CLOSE_SLACK_MS, 'every stalled connection closed').catch(() => null);
  await traffic;
  await pooledTraffic;
  (pooled.agent as { destroy(): void }).destroy();
  clearInterval(sampler);
  const open = stalled.filter((s) => s.closedAt === undefined);
  for (const s of open) s.socket.destroy();

  const answers: Record<string, number> = {};
  const late: string[] = [];
  const notEnvelope: string[] = [];
  for (const s of stalled) {
    const { status, envelope } = answerOf(s.received);
    answers[`${s.kind} ${status ?? 'none'}`] = (answers[`${s.kind} ${status ?? 'none'}`] ?? 0) + 1;
    if (status !== null && !envelope) notEnvelope.push(s.received.slice(0, 200));
    if (s.closedAt !== undefined && s.connectedAt !== undefined) {
      const deadline = s.kind === 'body' ? REQUEST_TIMEOUT_MS : HEADERS_TIMEOUT_MS;
      if (s.closedAt - s.connectedAt > deadline + CLOSE_SLACK_MS)
        late.push(`${s.kind} closed after ${round(s.closedAt - s.connectedAt, 0)} ms`);
    }
  }

  // After the attack: the same process serves again.
  const stillRunning = shortener.child.exitCode === null && shortener.child.signalCode === null;
  const afterwards: Record<string, number> = {};
  for (let i = 0; i < 10; i++) {
    const create = await send(target, {
      method: 'POST',
      path: '/api/links',
      json: { url: `https://example.com/after/${i}` },
      headers: { 'x-forwarded-for': ip(1000 + i) },
    });
    const redirect = await send(target, { path: `/${codes[i % codes.length]}` });
    for (const [what, o] of [
      ['create', create],
      ['redirect', redirect],
    ] as const) {
      const key = `${what} ${o.ok ? o.status : o.error}`;
      afterwards[key] = (afterwards[key] ?? 0) + 1;
    }
  }
  const readyAfter = await send(target, { path: '/readyz' });
  const descriptorsAfter = stillRunning ? descriptorsOf(pid) : null;

  reportFigures(t, `${STALLED} stalled connections, ulimit -n ${OPEN_FILE_LIMIT}`, {
    stalled_answers: answers,
    all_closed_within_ms: closedWithin === null ? null : round(closedWithin, 0),
    still_open: open.length,
    traffic_during: during,
    fresh_connections_reset_while_over_the_cap: resetWhileFull,
    readyz_during: readyDuring,
    descriptors_at_rest: descriptorsAtRest,
    descriptors_peak: peakDescriptors,
    descriptors_after: descriptorsAfter,
    traffic_after: afterwards,
    readyz_after: readyAfter.ok ? readyAfter.status : readyAfter.error,
  });

  assert.ok(stillRunning, 'the process survived the attack');
  assert.equal(open.length, 0, `${open.length} stalled connections still open ${REQUEST_TIMEOUT_MS + CLOSE_SLACK_MS} ms into the attack`);
  assert.deepEqual(late, [], 'stalled connections closed well after their deadline');
  // Over the cap, a connection is told 503 while at most REFUSALS_IN_FLIGHT refusals are open;
  // past them Node closes it at once without a word (the descriptors are bounded either way).
  // All 1,100 connect in one burst, so how many refusals are still open when the next one comes
  // depends on how fast this process reads its 503s and closes: up to the connections beyond
  // the cap and the refusals in flight may go unanswered, never more, and none is held open.
  let unanswered = 0;
  for (const [key, count] of Object.entries(answers)) {
    if (/^(headers|body) none$/.test(key)) unanswered += count;
    else assert.match(key, /^(headers|body) (408|503)$/, `${count} stalled connections answered ${key}`);
  }
  assert.ok(unanswered <= STALLED - cap - REFUSALS_IN_FLIGHT, `${unanswered} stalled connections closed without an answer`);
  assert.ok((answers['headers 503'] ?? 0) + (answers['body 503'] ?? 0) >= REFUSALS_IN_FLIGHT, 'the refusals in flight are told 503');
  assert.deepEqual(notEnvelope, [], 'answers to stalled connections outside the envelope');
  assert.deepEqual(
    unexpected,
    [],
    'traffic during the attack: only its answer or a 503 (or, on a fresh connection while over the cap, closed at once)',
  );
  assert.ok(!shortener.output().includes('"level":50'), `errors logged: ${shortener.output().slice(0, 2000)}`);
  assert.deepEqual(afterwards, { 'create 201': 10, 'redirect 302': 10 }, 'after the attack');
  assert.ok(readyAfter.ok && readyAfter.status === 200, 'ready again after the attack');
  assert.ok(
    descriptorsAfter !== null && descriptorsAfter < descriptorsAtRest + 50,
    `descriptors after: ${descriptorsAfter}, at rest: ${descriptorsAtRest}`,
  );
});

test('descriptors run out for real (a cap set above ulimit -n): creates answer 503, never 500; /readyz says so; recovery without restart', async (t) => {
  if (openFileLimitOfThisProcess() < STALLED + 400) {
    const reason = `the test process needs an open-file limit above ${STALLED + 400} (ulimit -n) to open ${STALLED} connections`;
    // CI must run it: a skip there would hide the attack this test replays.
    if (process.env.CI) assert.fail(reason);
    t.skip(reason);
    return;
  }
  await ensureStopped(shortener);
  // A misconfiguration the cap cannot save: the process takes connections until EMFILE.
  shortener = await startShortener(db.url, {
    trustProxy: '127.0.0.1',
    openFileLimit: OPEN_FILE_LIMIT,
    env: {
      HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      HTTP_MAX_CONNECTIONS: String(2 * OPEN_FILE_LIMIT),
    },
  });
  const pid = shortener.child.pid!;
  const ip = clientIps();
  // Connections open before the attack: their requests reach the handlers, which need new
  // database connections (the pool holds one), hence descriptors.
  const pooled = { url: shortener.url, agent: keepAliveAgent(8) };
  await Promise.all(Array.from({ length: 8 }, () => send(pooled, { path: '/healthz' })));
  const code = await createLink(pooled, ip(1));

  const attackStarted = performance.now();
  const stalled = Array.from({ length: STALLED }, (_, i) => stall(shortener!.port, i % 2 === 0 ? 'body' : 'headers', ip(20_000 + i)));
  const allClosed = () => stalled.every((s) => s.closedAt !== undefined);
  // The requests go out once the stalled connections hold every descriptor.
  await waitUntil(() => descriptorsOf(pid) >= OPEN_FILE_LIMIT - 2, 10_000, 'the open-file limit reached');
  let peakDescriptors = 0;
  const during: Record<string, number> = {};
  const readyReasons: Record<string, number> = {};
  let n = 0;
  while (!allClosed() && performance.now() - attackStarted < REQUEST_TIMEOUT_MS + CLOSE_SLACK_MS) {
    peakDescriptors = Math.max(peakDescriptors, descriptorsOf(pid));
    const burst = await Promise.all([
      ...Array.from({ length: 6 }, () =>
        send(
          pooled,
          {
            method: 'POST',
            path: '/api/links',
            json: { url: `https://example.com/emfile/${n}` },
            headers: { 'x-forwarded-for': ip(60_000 + n++) },
          },
          20_000,
        ),
      ),
      send(pooled, { path: `/${code}` }, 20_000),
    ]);
    burst.forEach((o, i) => {
      const key = `${i < 6 ? 'create' : 'redirect'} ${o.ok ? o.status : o.error}`;
      during[key] = (during[key] ?? 0) + 1;
    });
    const ready = await send(pooled, { path: '/readyz' }, 20_000);
    const reason = ready.ok
      ? `${ready.status} ${(jsonOf(ready) as { message?: string; status?: string } | undefined)?.message ?? 'ready'}`
      : ready.error;
    readyReasons[reason] = (readyReasons[reason] ?? 0) + 1;
    await sleep(50);
  }
  for (const s of stalled) s.socket.destroy();

  // Recovery: once descriptors are free again, the same process serves and becomes ready.
  let readyAfterMs: number | null = null;
  const recoveryStarted = performance.now();
  await waitUntil(
    async () => {
      const ready = await send({ url: shortener!.url, agent: false }, { path: '/readyz' });
      return ready.ok && ready.status === 200;
    },
    30_000,
    'ready again',
  )
    .then(() => (readyAfterMs = performance.now() - recoveryStarted))
    .catch(() => {});
  const afterwards: Record<string, number> = {};
  for (let i = 0; i < 5; i++) {
    const create = await send(
      { url: shortener.url, agent: false },
      {
        method: 'POST',
        path: '/api/links',
        json: { url: `https://example.com/recovered/${i}` },
        headers: { 'x-forwarded-for': ip(90_000 + i) },
      },
    );
    const key = `create ${create.ok ? create.status : create.error}`;
    afterwards[key] = (afterwards[key] ?? 0) + 1;
  }
  (pooled.agent as { destroy(): void }).destroy();

  reportFigures(t, `${STALLED} stalled connections, cap above ulimit -n ${OPEN_FILE_LIMIT} (real EMFILE)`, {
    traffic_during: during,
    readyz_during: readyReasons,
    descriptors_peak: peakDescriptors,
    ready_again_after_ms: readyAfterMs === null ? null : round(readyAfterMs, 0),
    traffic_after: afterwards,
  });

  const statuses = Object.keys(during);
  assert.ok(!statuses.some((k) => / 500$/.test(k)), `500s during the attack: ${JSON.stringify(during)}`);
  assert.ok(
    statuses.every((k) => /^(create (201|503)|redirect (302|503))$/.test(k)),
    `answers during the attack: ${JSON.stringify(during)}`,
  );
  assert.ok(statuses.includes('create 503'), `the process never ran out of descriptors: ${JSON.stringify(during)}`);
  assert.ok(
    Object.keys(readyReasons).includes('503 Service not ready: out of file descriptors'),
    `readyz: ${JSON.stringify(readyReasons)}`,
  );
  assert.ok(shortener.child.exitCode === null && shortener.child.signalCode === null, 'the process survived');
  assert.notEqual(readyAfterMs, null, 'ready again after the attack');
  assert.deepEqual(afterwards, { 'create 201': 5 });
});

test('one client with 800 stalled bodies holds only its share: other clients are served throughout, and its bodies are cut at the public deadline', async (t) => {
  const ATTACK = 800;
  if (openFileLimitOfThisProcess() < ATTACK + 400) {
    const reason = `the test process needs an open-file limit above ${ATTACK + 400} (ulimit -n) to open ${ATTACK} connections`;
    if (process.env.CI) assert.fail(reason);
    t.skip(reason);
    return;
  }
  await ensureStopped(shortener);
  // Default limits: a cap of 768 under ulimit -n 1024, a quarter of it (192) per client, and a
  // 10 s deadline for a body sent without credentials. No proxy is trusted.
  shortener = await startShortener(db.url, { openFileLimit: OPEN_FILE_LIMIT });
  const port = shortener.port;
  const attacker = '127.0.0.9';
  const other = '127.0.0.10';
  const startedAt = performance.now();
  const stalled = Array.from({ length: ATTACK }, () => {
    const entry: Stalled = { socket: net.connect({ port, host: '127.0.0.1', localAddress: attacker }), kind: 'body', received: '' };
    entry.socket.on('connect', () => {
      entry.connectedAt = performance.now();
      entry.socket.write(
        'POST /api/links HTTP/1.1\r\nHost: sho.rt\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"url":',
      );
    });
    entry.socket.on('data', (d: Buffer) => (entry.received += d.toString('latin1')));
    entry.socket.on('error', () => {});
    entry.socket.on('close', () => (entry.closedAt = performance.now()));
    return entry;
  });
  await waitUntil(() => stalled.every((s) => s.connectedAt !== undefined || s.closedAt !== undefined), 20_000, 'the attack connected');

  // Another client's fresh connections while the attack holds its share.
  const others: Record<string, number> = {};
  while (stalled.some((s) => s.closedAt === undefined) && performance.now() - startedAt < 10_000 + CLOSE_SLACK_MS) {
    const outcome = await send({ url: shortener.url, agent: false, localAddress: other }, { path: '/healthz' });
    const key = outcome.ok ? String(outcome.status) : outcome.error;
    others[key] = (others[key] ?? 0) + 1;
    await sleep(150);
  }
  const answers: Record<string, number> = {};
  for (const s of stalled) {
    const key = String(answerOf(s.received).status);
    answers[key] = (answers[key] ?? 0) + 1;
  }
  const lastClosedS = round((Math.max(...stalled.map((s) => s.closedAt ?? Number.POSITIVE_INFINITY)) - startedAt) / 1000, 1);
  reportFigures(t, 'one client cannot starve the others', {
    attack: ATTACK,
    attacker_answers: answers,
    other_client: others,
    last_closed_s: lastClosedS,
  });
  assert.ok(
    stalled.every((s) => s.closedAt !== undefined),
    'every stalled connection was closed',
  );
  assert.deepEqual(Object.keys(others), ['200'], `the other client is served throughout: ${JSON.stringify(others)}`);
  assert.ok((others['200'] ?? 0) >= 10, 'the other client asked many times during the attack');
  // A quarter of the cap got in: cut at the body deadline (408), or refused by the create limit and then
  // closed at the same deadline; the rest were refused at once.
  assert.equal((answers['408'] ?? 0) + (answers['429'] ?? 0), 192, JSON.stringify(answers));
  assert.equal(answers['503'], ATTACK - 192, JSON.stringify(answers));
  assert.ok(lastClosedS < 10 + CLOSE_SLACK_MS / 1000, `the last stalled connection closed after ${lastClosedS} s`);
});
