// 20 concurrent registrations of one address, each in a different mix of
// upper and lower case, against a running accounts process: the unique index
// on lower(email) lets exactly one through; the others get the duplicate 400.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { reportFigures, round } from './helpers/figures.js';
import { jsonOf, keepAliveAgent, send } from './helpers/http.js';
import { queryOnce } from './helpers/postgres.js';
import { ensureStopped, startAccounts } from './helpers/services.js';
import { accountsDatabase } from '../helpers/accounts.js';

const RACERS = 20;

let db: TestDatabase;
let accounts: ServiceProcess | undefined;

before(async () => {
  db = await accountsDatabase();
  accounts = await startAccounts(db.url);
});

after(async () => {
  await ensureStopped(accounts);
  await db.drop();
});

/** The address with each letter's case chosen at random, and the first variant all upper case. */
function casings(address: string, n: number): string[] {
  const variants = new Set<string>([address.toUpperCase(), address]);
  while (variants.size < n) {
    const bits = randomBytes(address.length);
    variants.add([...address].map((ch, i) => (bits[i]! & 1 ? ch.toUpperCase() : ch.toLowerCase())).join(''));
  }
  return [...variants];
}

test('20 concurrent registrations of one email in mixed case: exactly one 201', async (t) => {
  const address = `race.${randomBytes(4).toString('hex')}@example.com`;
  const emails = casings(address, RACERS);
  assert.equal(new Set(emails).size, RACERS);
  const target = { url: accounts!.url, agent: keepAliveAgent(RACERS) };

  const started = performance.now();
  const outcomes = await Promise.all(
    emails.map((email, i) =>
      send(target, { method: 'POST', path: '/auth/register', json: { name: `Racer ${i}`, email, password: 'race-password-1' } }, 60_000),
    ),
  );
  const elapsedMs = performance.now() - started;
  (target.agent as { destroy(): void }).destroy();

  const statuses: Record<string, number> = {};
  for (const o of outcomes) statuses[o.ok ? String(o.status) : o.error] = (statuses[o.ok ? String(o.status) : o.error] ?? 0) + 1;
  assert.deepEqual(statuses, { 201: 1, 400: RACERS - 1 });
  for (const o of outcomes) {
    if (o.ok && o.status === 400) {
      assert.equal((jsonOf(o) as { message: string }).message, 'An account with this email already exists');
    }
  }
  const winner = jsonOf(outcomes.find((o) => o.ok && o.status === 201)!) as { data: { email: string } };
  assert.equal(winner.data.email, address, 'stored lowercased');
  const rows = await queryOnce<{ email: string }>(db.url, 'SELECT email FROM users WHERE lower(email) = $1', [address]);
  assert.deepEqual(rows, [{ email: address }]);

  reportFigures(t, 'concurrent registration of one email', { racers: RACERS, statuses, elapsed_ms: round(elapsedMs) });
});
