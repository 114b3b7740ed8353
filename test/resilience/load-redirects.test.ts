// 10,000 concurrent redirects split over two shortener instances (processes)
// on one database, through keep-alive agents of 100 sockets per instance. Every
// redirect must be a 302 and the stored clicks must equal the 302s exactly, per
// code: no click lost, none counted twice, no batch failed. Concurrent click
// batches of both instances (up to four in flight each) lock overlapping sets
// of rows; before src/shortener/repository.ts locked them in code order, this
// test saw 40P01 deadlocks answered 500 (and the clicks of those batches lost).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { reportFigures, round } from './helpers/figures.js';
import { keepAliveAgent, send } from './helpers/http.js';
import { queryOnce } from './helpers/postgres.js';
import { ensureStopped, serviceDatabase, startShortener } from './helpers/services.js';

const REDIRECTS = 10_000;
const CODES = 20;
const SOCKETS_PER_INSTANCE = 100;

let db: TestDatabase;
const instances: ServiceProcess[] = [];

before(async () => {
  db = await serviceDatabase('shortener');
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
  const started = performance.now();
  const outcomes = await Promise.all(visits.map((code, i) => send(targets[i % 2]!, { path: `/${code}` }, 60_000)));
  const elapsedMs = performance.now() - started;
  for (const target of targets) (target.agent as { destroy(): void }).destroy();

  const statuses: Record<string, number> = {};
  const redirects = new Map(codes.map((c) => [c, 0]));
  outcomes.forEach((o, i) => {
    const key = o.ok ? String(o.status) : o.error;
    statuses[key] = (statuses[key] ?? 0) + 1;
    if (o.ok && o.status === 302) redirects.set(visits[i]!, redirects.get(visits[i]!)! + 1);
  });
  const rows = await queryOnce<{ code: string; clicks: number }>(db.url, 'SELECT code, clicks FROM links WHERE clicks > 0 ORDER BY code');
  const clicks = new Map(rows.map((r) => [r.code, r.clicks]));
  const mismatched = codes.filter((c) => (clicks.get(c) ?? 0) !== redirects.get(c));
  const total = rows.reduce((sum, r) => sum + r.clicks, 0);

  reportFigures(t, '10,000 concurrent redirects, 2 instances', {
    redirects: REDIRECTS,
    statuses,
    clicks_stored: total,
    rps: Math.round(REDIRECTS / (elapsedMs / 1000)),
    elapsed_ms: round(elapsedMs),
  });
  assert.deepEqual(statuses, { 302: REDIRECTS }, 'every redirect answered 302');
  assert.equal(total, REDIRECTS, 'clicks stored == 302s received');
  assert.deepEqual(mismatched, [], 'codes whose clicks differ from their 302s');
  assert.equal(rows.length, CODES, 'no click on a code nobody visited');
});
