// 10,000 concurrent redirects split over two shortener instances (processes)
// on one database, through keep-alive agents of 100 sockets per instance. Every
// redirect must be a 302 and the stored clicks must equal the 302s exactly, per
// code: no click lost, none counted twice, no batch failed. Each carries a
// User-Agent and Referer from a realistic mix: the visits stored per code and
// per traffic class must equal the 302s exactly too. Concurrent click
// batches of both instances (up to four in flight each) lock overlapping sets
// of rows; before src/shortener/repository.ts locked them in code order, this
// test saw 40P01 deadlocks answered 500 (and the clicks of those batches lost).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { classifyAgent } from '../../src/shortener/visits.js';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { reportFigures, round } from './helpers/figures.js';
import { keepAliveAgent, send } from './helpers/http.js';
import { queryOnce } from './helpers/postgres.js';
import { ensureStopped, startShortener } from './helpers/services.js';
import { shortenerDatabase } from '../helpers/shortener.js';

const AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0',
  'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
  'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)',
  'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
  'curl/8.4.0',
];
const REFERRERS = ['', 'https://news.ycombinator.com/item?id=1', 'https://t.co/abc', 'https://www.google.com/'];

const REDIRECTS = 10_000;
const CODES = 20;
const SOCKETS_PER_INSTANCE = 100;

let db: TestDatabase;
const instances: ServiceProcess[] = [];

before(async () => {
  db = await shortenerDatabase();
});

after(async () => {
  for (const instance of instances) await ensureStopped(instance);
  await db.drop();
});

test('10,000 concurrent redirects over two instances: every one a 302, clicks == 302s per code', async (t) => {
  // A young deployment: a small table, with statistics (autovacuum gathers them soon enough).
  // With so few rows PostgreSQL updates a batch through a sequential scan, so rows are met in
  // heap order, which every update changes: batches must still lock in one order.
  await queryOnce(
    db.url,
    `INSERT INTO links (code, original_url)
     SELECT 'c' || lpad(i::text, 6, '0'), 'https://example.com/page/' || i FROM generate_series(0, $1 - 1) AS i`,
    [CODES],
  );
  await queryOnce(db.url, 'ANALYZE links');
  const codes = Array.from({ length: CODES }, (_, i) => `c${String(i).padStart(6, '0')}`);
  for (let i = 0; i < 2; i++) instances.push(await startShortener(db.url));
  const targets = instances.map((instance) => ({ url: instance.url, agent: keepAliveAgent(SOCKETS_PER_INSTANCE) }));

  // Codes in random order, so concurrent click batches hold different, overlapping sets of rows.
  const visits = Array.from({ length: REDIRECTS }, () => codes[Math.floor(Math.random() * CODES)]!);
  const headersOf = (i: number) => {
    const referer = REFERRERS[i % REFERRERS.length]!;
    return { 'user-agent': AGENTS[i % AGENTS.length]!, ...(referer && { referer }) };
  };
  const started = performance.now();
  const outcomes = await Promise.all(visits.map((code, i) => send(targets[i % 2]!, { path: `/${code}`, headers: headersOf(i) }, 60_000)));
  const elapsedMs = performance.now() - started;
  for (const target of targets) (target.agent as { destroy(): void }).destroy();

  const statuses: Record<string, number> = {};
  const redirects = new Map(codes.map((c) => [c, 0]));
  const byClass: Record<string, number> = {};
  outcomes.forEach((o, i) => {
    const key = o.ok ? String(o.status) : o.error;
    statuses[key] = (statuses[key] ?? 0) + 1;
    if (o.ok && o.status === 302) {
      redirects.set(visits[i]!, redirects.get(visits[i]!)! + 1);
      const cls = classifyAgent(headersOf(i)['user-agent']);
      byClass[cls] = (byClass[cls] ?? 0) + 1;
    }
  });
  const rows = await queryOnce<{ code: string; clicks: number }>(db.url, 'SELECT code, clicks FROM links WHERE clicks > 0 ORDER BY code');
  const clicks = new Map(rows.map((r) => [r.code, r.clicks]));
  const mismatched = codes.filter((c) => (clicks.get(c) ?? 0) !== redirects.get(c));
  const total = rows.reduce((sum, r) => sum + r.clicks, 0);
  const visitRows = await queryOnce<{ code: string; visits: number }>(
    db.url,
    'SELECT code, sum(visits)::int AS visits FROM visit_counts GROUP BY code',
  );
  const visitsMismatched = codes.filter((c) => (visitRows.find((r) => r.code === c)?.visits ?? 0) !== redirects.get(c));
  const classRows = await queryOnce<{ class: string; visits: number }>(
    db.url,
    'SELECT class, sum(visits)::int AS visits FROM visit_counts GROUP BY class',
  );

  reportFigures(t, '10,000 concurrent redirects, 2 instances', {
    redirects: REDIRECTS,
    statuses,
    clicks_stored: total,
    visits_stored: visitRows.reduce((sum, r) => sum + r.visits, 0),
    rps: Math.round(REDIRECTS / (elapsedMs / 1000)),
    elapsed_ms: round(elapsedMs),
  });
  assert.deepEqual(statuses, { 302: REDIRECTS }, 'every redirect answered 302');
  assert.equal(total, REDIRECTS, 'clicks stored == 302s received');
  assert.deepEqual(mismatched, [], 'codes whose clicks differ from their 302s');
  assert.equal(rows.length, CODES, 'no click on a code nobody visited');
  assert.deepEqual(visitsMismatched, [], 'codes whose visits differ from their 302s');
  assert.deepEqual(Object.fromEntries(classRows.map((r) => [r.class, r.visits])), byClass, 'visits per traffic class');
});
