// 150 concurrent password sign-ins against a running idp, with REST reads in
// between that open new database connections (SCRAM, which runs on the libuv
// thread pool). bcrypt runs on the kit's worker threads, so those connections
// are not starved: every REST read is a 200, and every sign-in either succeeds
// or, when the bounded queue is full, is a 503 with Retry-After; never a 500.
// Latencies are reported, not asserted (shared machine).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import { reportFigures, round } from './helpers/figures.js';
import { keepAliveAgent, send } from './helpers/http.js';
import { ensureStopped, IDP_KEYS, startIdpProcess } from './helpers/services.js';
import { idpDatabase } from '../helpers/idp.js';

const SIGN_INS = 150;
const READS = 40;
const PASSWORD = 'resilience-idp-pw-1';

let db: TestDatabase;
let idp: Awaited<ReturnType<typeof startIdpProcess>> | undefined;

before(async () => {
  db = await idpDatabase();
  idp = await startIdpProcess(db.url);
});

after(async () => {
  await ensureStopped(idp);
  await db.drop();
});

test(`${SIGN_INS} concurrent idp sign-ins: REST reads keep their database connections, no 500`, async (t) => {
  const target = { url: idp!.url, agent: keepAliveAgent(SIGN_INS + READS) };
  const email = `storm-${Date.now()}@example.com`;
  const created = await send(target, {
    method: 'POST',
    path: '/auth/v1/admin/users',
    headers: { apikey: IDP_KEYS.secret },
    json: { email, password: PASSWORD, email_confirm: true },
  });
  assert.ok(created.ok && created.status === 200, JSON.stringify(created));

  const signIns = Promise.all(
    Array.from({ length: SIGN_INS }, (_, i) =>
      send(
        target,
        {
          method: 'POST',
          path: '/auth/v1/token?grant_type=password',
          headers: { apikey: IDP_KEYS.publishable },
          json: { email, password: i % 2 ? PASSWORD : 'wrong-password-1' },
        },
        120_000,
      ),
    ),
  );
  // Each read on its own connection to the idp; the idp opens database connections as they pile up.
  const reads = Promise.all(
    Array.from({ length: READS }, async (_, i) => {
      await new Promise((resolve) => setTimeout(resolve, 10 * i));
      return send(
        { url: idp!.url, agent: false },
        { path: '/rest/v1/notes?select=id&limit=1', headers: { apikey: IDP_KEYS.secret } },
        60_000,
      );
    }),
  );
  const [signInOutcomes, readOutcomes] = await Promise.all([signIns, reads]);
  (target.agent as { destroy(): void }).destroy();

  const count = (outcomes: typeof readOutcomes) => {
    const counts: Record<string, number> = {};
    for (const o of outcomes) counts[o.ok ? String(o.status) : o.error] = (counts[o.ok ? String(o.status) : o.error] ?? 0) + 1;
    return counts;
  };
  const signInStatuses = count(signInOutcomes);
  const readStatuses = count(readOutcomes);
  assert.ok(
    Object.keys(signInStatuses).every((s) => ['200', '400', '503'].includes(s)),
    JSON.stringify(signInStatuses),
  );
  for (const o of signInOutcomes) if (o.ok && o.status === 503) assert.ok(Number(o.headers['retry-after']) >= 1, 'Retry-After on a 503');
  assert.deepEqual(readStatuses, { 200: READS });
  reportFigures(t, `${SIGN_INS} concurrent idp sign-ins with REST reads opening database connections`, {
    sign_ins: signInStatuses,
    reads: readStatuses,
    read_max_ms: round(Math.max(...readOutcomes.map((o) => o.ms))),
    sign_in_max_ms: round(Math.max(...signInOutcomes.map((o) => o.ms))),
  });
});
