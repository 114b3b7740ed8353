// A login during a flood of 60 concurrent registrations, against a running
// accounts process: from one IP the per-IP registration limit lets 10 hash and
// refuses the rest before any hashing; from 60 IPs every registration hashes,
// and the hasher serves the login before the queued registrations. Latencies
// are reported, not asserted (shared machine); what is asserted is that the
// login succeeds and no answer is a 500.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { reportFigures, round } from './helpers/figures.js';
import { keepAliveAgent, send, type Target } from './helpers/http.js';
import { registerAccount } from './helpers/api.js';
import { ensureStopped, startAccounts } from './helpers/services.js';
import { uniqueEmail } from '../helpers/emails.js';
import { clientIps } from '../helpers/client-ips.js';
import { accountsDatabase } from '../helpers/accounts.js';

const FLOOD = 60;
const PASSWORD = 'resilience-pw-1';

let db: TestDatabase;
let accounts: ServiceProcess | undefined;

before(async () => {
  db = await accountsDatabase();
  // The service's own per-IP registration limit (10 per hour), as deployed; X-Forwarded-For believed from the test.
  accounts = await startAccounts(db.url, { env: { REGISTER_MAX_PER_IP: '10', TRUST_PROXY: '127.0.0.1' } });
});

after(async () => {
  await ensureStopped(accounts);
  await db.drop();
});

async function loginMs(target: Target, email: string, ip: string): Promise<number> {
  const outcome = await send(
    target,
    { method: 'POST', path: '/auth/login', json: { email, password: PASSWORD }, headers: { 'x-forwarded-for': ip } },
    60_000,
  );
  assert.ok(outcome.ok && outcome.status === 200, JSON.stringify(outcome));
  return outcome.ms;
}

for (const [label, sameIp] of [
  ['one IP', true],
  ['60 IPs', false],
] as const) {
  test(`a login during ${FLOOD} concurrent registrations from ${label}: served, no 500`, async (t) => {
    const target = { url: accounts!.url, agent: keepAliveAgent(FLOOD + 2) };
    const ips = clientIps();
    const email = uniqueEmail('during');
    await registerAccount({ url: accounts!.url }, email, PASSWORD);
    const quietMs = await loginMs(target, email, ips(1001));
    const flood = Promise.all(
      Array.from({ length: FLOOD }, (_, i) =>
        send(
          target,
          {
            method: 'POST',
            path: '/auth/register',
            json: { name: 'Flood', email: uniqueEmail('flood'), password: PASSWORD },
            headers: { 'x-forwarded-for': sameIp ? ips(0) : ips(i) },
          },
          120_000,
        ),
      ),
    );
    // Let the flood reach the hasher first.
    await new Promise((resolve) => setTimeout(resolve, 150));
    const duringMs = await loginMs(target, email, ips(1002));
    const outcomes = await flood;
    (target.agent as { destroy(): void }).destroy();
    const statuses: Record<string, number> = {};
    for (const o of outcomes) statuses[o.ok ? String(o.status) : o.error] = (statuses[o.ok ? String(o.status) : o.error] ?? 0) + 1;
    assert.ok(
      Object.keys(statuses).every((s) => ['201', '429', '503'].includes(s)),
      JSON.stringify(statuses),
    );
    if (sameIp) assert.deepEqual(statuses, { 201: 10, 429: FLOOD - 10 });
    reportFigures(t, `login during ${FLOOD} concurrent registrations from ${label}`, {
      login_quiet_ms: round(quietMs),
      login_during_ms: round(duringMs),
      registrations: statuses,
    });
  });
}
