// kill -9 of a shortener instance in the middle of a redirect load. A click is
// committed before its 302 is sent, so whatever the kill cuts, every 302 a
// client received is in the database: after a restart, the stored clicks of
// each code are at least the 302s received for it (more only by the clicks
// whose response the kill swallowed).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { createLink } from './helpers/api.js';
import { reportFigures, round } from './helpers/figures.js';
import { jsonOf, keepAliveAgent, runLoad, send, waitUntil } from './helpers/http.js';
import { ensureStopped, startShortener } from './helpers/services.js';
import { clientIps } from '../helpers/client-ips.js';
import { shortenerDatabase, TEST_ADMIN_KEY as ADMIN_KEY } from '../helpers/shortener.js';

const AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
  'curl/8.4.0',
];

let db: TestDatabase;
let first: ServiceProcess | undefined;
let second: ServiceProcess | undefined;

before(async () => {
  db = await shortenerDatabase();
});

after(async () => {
  await ensureStopped(first);
  await ensureStopped(second);
  await db.drop();
});

test('kill -9 mid-load: after a restart, stored visits == stored clicks ≥ the 302s clients received, for every code', async (t) => {
  first = await startShortener(db.url, { trustProxy: '127.0.0.1' });
  const agent = keepAliveAgent(32);
  const target = { url: first.url, agent };
  const ip = clientIps();
  const codes: string[] = [];
  for (let i = 0; i < 20; i++) codes.push(await createLink(target, ip(i)));

  const redirects = new Map(codes.map((c) => [c, 0]));
  let killedAt = 0;
  const loadStarted = Date.now();
  const load = runLoad({
    concurrency: 32,
    total: 1_000_000,
    deadline: Date.now() + 60_000,
    // Once the process is gone, every worker stops after its current request.
    stop: () => killedAt > 0,
    next: (i) => ({
      target,
      spec: {
        path: `/${codes[i % codes.length]}`,
        headers: { 'user-agent': AGENTS[i % AGENTS.length]!, referer: 'https://example.org/feed' },
      },
    }),
    onOutcome: (outcome, _i, spec) => {
      if (outcome.ok && outcome.status === 302) {
        const code = spec.path.slice(1);
        redirects.set(code, redirects.get(code)! + 1);
      }
    },
    timeoutMs: 5000,
  });
  // Let the load reach its stride (on a busy machine that takes longer), then kill in the middle of it.
  const received = () => [...redirects.values()].reduce((a, b) => a + b, 0);
  await waitUntil(() => received() >= 2000, 30_000, '2000 redirects before the kill');
  const receivedBeforeKill = received();
  await first.kill();
  killedAt = Date.now();
  const summary = await load;
  agent.destroy();

  const cut = Object.entries(summary.statuses).filter(([k]) => k !== '302');

  second = await startShortener(db.url, { env: { SHORTENER_ADMIN_KEY: ADMIN_KEY } });
  const restarted = { url: second.url, agent: false as const };
  let stored = 0;
  let storedVisits = 0;
  for (const code of codes) {
    const stats = await send(restarted, { path: `/api/links/${code}` });
    assert.ok(stats.ok && stats.status === 200, `stats of ${code} after the restart`);
    const clicks = (jsonOf(stats) as { data: { clicks: number } }).data.clicks;
    stored += clicks;
    assert.ok(clicks >= redirects.get(code)!, `${code}: ${clicks} stored clicks < ${redirects.get(code)} redirects received`);
    const visits = await send(restarted, { path: `/api/links/${code}/visits`, headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    assert.ok(visits.ok && visits.status === 200, `visits of ${code} after the restart`);
    const visitTotal = (jsonOf(visits) as { data: { totals: { visits: number } } }).data.totals.visits;
    storedVisits += visitTotal;
    assert.equal(visitTotal, clicks, `${code}: visits == clicks`);
  }
  // The restarted instance serves again.
  const again = await send(restarted, { path: `/${codes[0]}` });
  assert.ok(again.ok && again.status === 302, 'redirect after the restart');

  reportFigures(t, 'kill -9 under redirect load', {
    redirects_received: received(),
    clicks_stored: stored,
    visits_stored: storedVisits,
    clicks_without_response: stored - received(),
    failed_at_kill: Object.fromEntries(cut),
    rps_before_kill: Math.round(receivedBeforeKill / ((killedAt - loadStarted) / 1000)),
    load_seconds: round(summary.elapsedMs / 1000),
  });
});
