// SIGTERM to a shortener process while 50 keep-alive connections are busy with
// redirects. Every request must end one of two ways: a full response, or a
// connection failure before any byte of a response, for a request the server
// never took. No response may be cut, clicks must equal the 302s received
// exactly (so no request the server processed lost its answer, and none that
// failed was counted), and the process exits 0.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { createLink } from './helpers/api.js';
import { reportFigures, round } from './helpers/figures.js';
import { keepAliveAgent, runLoad, waitUntil } from './helpers/http.js';
import { queryOnce } from './helpers/postgres.js';
import { ensureStopped, startShortener } from './helpers/services.js';
import { clientIps } from '../helpers/client-ips.js';
import { shortenerDatabase } from '../helpers/shortener.js';

const CONNECTIONS = 50;
/**
 * Failures before any byte of a response: the connection was refused (the server no longer
 * listens), reset while it waited in the accept queue, or, on a kept-alive connection, closed
 * as idle while the request was on its way (HTTP/1.1 lets a server close an idle connection at
 * any time; the request was never read, and a client may retry it). That none of them was
 * processed is proved by clicks == 302s below.
 */
const BEFORE_ACCEPTANCE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'socket hang up']);

let db: TestDatabase;
let shortener: ServiceProcess | undefined;

before(async () => {
  db = await shortenerDatabase();
});

after(async () => {
  await ensureStopped(shortener);
  await db.drop();
});

test('SIGTERM under 50 busy connections: no accepted request lost, clicks == 302s, exit 0', async (t) => {
  shortener = await startShortener(db.url, { trustProxy: '127.0.0.1' });
  const agent = keepAliveAgent(CONNECTIONS);
  const target = { url: shortener.url, agent };
  const ip = clientIps();
  const codes: string[] = [];
  for (let i = 0; i < 10; i++) codes.push(await createLink(target, ip(i)));

  const outcomes: Record<string, number> = {};
  const cut: string[] = [];
  let signalledAt = 0;
  let exited = false;
  let before = 0;
  let lastResponseAt = 0;
  const loadStarted = Date.now();
  // The workers keep sending until the process is gone: after the signal their new
  // connections are refused while the requests already taken are answered.
  const load = runLoad({
    concurrency: CONNECTIONS,
    total: 1_000_000,
    deadline: Date.now() + 70_000,
    stop: () => exited,
    next: (i) => ({ target, spec: { path: `/${codes[i % codes.length]}` } }),
    onOutcome: (outcome) => {
      if (outcome.ok) {
        outcomes[outcome.status] = (outcomes[outcome.status] ?? 0) + 1;
        if (signalledAt === 0) before += 1;
        else lastResponseAt = Date.now();
        return;
      }
      if (outcome.responseStarted || !BEFORE_ACCEPTANCE.has(outcome.error)) {
        const key = `${outcome.error}${outcome.responseStarted ? ' after the response began' : ''}`;
        outcomes[key] = (outcomes[key] ?? 0) + 1;
        cut.push(key);
        return;
      }
      const key =
        outcome.error === 'ECONNREFUSED'
          ? 'refused'
          : outcome.reusedSocket
            ? 'closed unread on a kept-alive connection'
            : 'reset before acceptance';
      outcomes[key] = (outcomes[key] ?? 0) + 1;
    },
    timeoutMs: 15_000,
  });
  // In the middle of the load: once it has reached its stride (later on a busy machine).
  await waitUntil(() => before >= 2000, 30_000, '2000 redirects before the signal');
  signalledAt = Date.now();
  const code = await shortener.stop();
  exited = true;
  const exitedAfterMs = Date.now() - signalledAt;
  const summary = await load;
  agent.destroy();

  assert.equal(code, 0, `exit code (output: ${shortener.output().slice(-2000)})`);
  assert.deepEqual(cut, [], 'requests cut after the server took them');
  const unexpected = Object.keys(outcomes).filter(
    (k) => !['302', '503', 'refused', 'closed unread on a kept-alive connection', 'reset before acceptance'].includes(k),
  );
  assert.deepEqual(unexpected, [], `answers other than 302, a 503 "closing" or a refusal: ${JSON.stringify(outcomes)}`);
  assert.ok(lastResponseAt > signalledAt, 'no response came after the signal: nothing was in flight to drain');
  const received = outcomes['302'] ?? 0;
  const [row] = await queryOnce<{ clicks: number }>(
    db.url,
    'SELECT coalesce(sum(clicks), 0)::int AS clicks FROM links WHERE code = ANY($1)',
    [codes],
  );
  assert.equal(row!.clicks, received, 'stored clicks == 302 responses received');

  reportFigures(t, 'graceful shutdown under load', {
    connections: CONNECTIONS,
    outcomes,
    clicks: row!.clicks,
    exit_code: code,
    exit_after_sigterm_ms: exitedAfterMs,
    last_response_after_sigterm_ms: Math.max(0, lastResponseAt - signalledAt),
    rps_before_sigterm: Math.round(before / ((signalledAt - loadStarted) / 1000)),
    load_seconds: round(summary.elapsedMs / 1000),
  });
});
