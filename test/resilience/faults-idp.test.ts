// The idp unreachable: its process is stopped, then a new one is started on the
// same port. Meanwhile notes (one process per token-verification mode) answers
// every route with 503 {message}, promptly, never hanging nor crashing; when the
// idp is back it recovers by itself, with the sessions and notes made before.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { createNote, NOTES_PASSWORD, notesUser } from './helpers/api.js';
import { percentile, reportFigures, round } from './helpers/figures.js';
import { jsonOf, keepAliveAgent, type Outcome, type RequestSpec, runLoad, send, type Target, waitUntil } from './helpers/http.js';
import { ensureStopped, startIdpProcess, startNotesProcess } from './helpers/services.js';
import { uniqueEmail } from '../helpers/emails.js';
import { freePort } from '../helpers/ports.js';
import { idpDatabase } from '../helpers/idp.js';

const UNAVAILABLE = { message: 'Identity provider unavailable, try again shortly' };
/** A refused connection is answered at once; 5 s is the bound on any answer during the outage. */
const OUTAGE_ANSWER_BOUND_MS = 5000;

let db: TestDatabase;
let idp: ServiceProcess | undefined;
const notes: ServiceProcess[] = [];

before(async () => {
  db = await idpDatabase();
});

after(async () => {
  for (const n of notes) await ensureStopped(n);
  await ensureStopped(idp);
  await db.drop();
});

test('idp stopped and started again on its port: notes answers 503 {message} meanwhile, then recovers', async (t) => {
  const port = await freePort();
  idp = await startIdpProcess(db.url, { port });
  for (const verify of ['remote', 'local'] as const) notes.push(await startNotesProcess(idp.url, { verify }));
  const targets: Target[] = notes.map((n) => ({ url: n.url, agent: keepAliveAgent(16) }));

  const email = uniqueEmail('idp-outage');
  const user = await notesUser(targets[0]!, email);
  const noteIds = [
    await createNote(targets[0]!, user.token, 'before the outage'),
    await createNote(targets[1]!, user.token, 'before the outage too'),
  ];
  const auth = { authorization: `Bearer ${user.token}` };
  const routes: Array<[string, RequestSpec]> = [
    ['register', { method: 'POST', path: '/auth/register', json: { email: uniqueEmail('during'), password: NOTES_PASSWORD } }],
    ['login', { method: 'POST', path: '/auth/login', json: { email, password: NOTES_PASSWORD } }],
    ['list', { path: '/notes', headers: auth }],
    ['create', { method: 'POST', path: '/notes', json: { title: 'during the outage' }, headers: auth }],
    ['delete', { method: 'DELETE', path: `/notes/${noteIds[0]}`, headers: auth }],
  ];

  await idp.stop();
  const stoppedAt = Date.now();

  // Every route of both notes processes, many times and concurrently, for a few seconds.
  const latencies: number[] = [];
  const wrong: string[] = [];
  const check = (name: string, o: Outcome) => {
    latencies.push(o.ms);
    if (!o.ok) return void wrong.push(`${name}: ${o.error}`);
    const body = jsonOf(o);
    if (o.status !== 503 || JSON.stringify(body) !== JSON.stringify(UNAVAILABLE)) wrong.push(`${name}: ${o.status} ${o.text}`);
    if (o.headers['retry-after'] !== '1') wrong.push(`${name}: retry-after ${o.headers['retry-after']}`);
  };
  const outage = await runLoad({
    concurrency: 16,
    total: 2000,
    deadline: Date.now() + 4000,
    timeoutMs: 15_000,
    next: (i) => ({ target: targets[i % 2]!, spec: routes[Math.floor(i / 2) % routes.length]![1] }),
    onOutcome: (o, _i, spec) => check(routes.find(([, s]) => s === spec)![0], o),
  });
  for (const target of targets) {
    const ready = await send(target, { path: '/readyz' });
    assert.equal(ready.ok && ready.status, 503, 'readiness while the idp is away');
    assert.deepEqual(Object.keys(jsonOf(ready) as object), ['message']);
  }
  assert.deepEqual(wrong.slice(0, 10), [], 'answers during the outage');
  assert.ok(Math.max(...latencies) < OUTAGE_ANSWER_BOUND_MS, `slowest answer during the outage: ${Math.max(...latencies)} ms`);
  for (const n of notes) assert.equal(n.child.exitCode, null, 'notes still running');
  assert.doesNotMatch(notes.map((n) => n.output()).join(''), /"level":(50|60)/, 'no error logged as a crash');

  // The idp comes back on the same port; notes needs no restart.
  idp = await startIdpProcess(db.url, { port });
  const upAt = Date.now();
  const recoveredInMs = await Promise.all(
    targets.map((target) =>
      waitUntil(
        async () => {
          const list = await send(target, { path: '/notes', headers: auth });
          return list.ok && list.status === 200;
        },
        5000,
        'notes to answer again',
        25,
      ),
    ),
  );
  for (const target of targets) {
    const list = await send(target, { path: '/notes', headers: auth });
    assert.equal(list.ok && list.status, 200);
    const ids = (jsonOf(list) as Array<{ id: number }>).map((n) => n.id).sort();
    assert.deepEqual(ids, [...noteIds].sort(), 'notes from before the outage, nothing else');
    assert.equal((await send(target, { path: '/readyz' })).ok, true);
  }
  await notesUser(targets[1]!, uniqueEmail('after'));
  for (const target of targets) (target.agent as { destroy(): void }).destroy();

  reportFigures(t, 'idp unreachable (notes)', {
    outage_requests: outage.sent,
    outage_statuses: outage.statuses,
    outage_p50_ms: round(percentile(latencies, 50)),
    outage_max_ms: round(Math.max(...latencies)),
    idp_down_ms: upAt - stoppedAt,
    recovered_after_idp_up_ms: `${recoveredInMs.map((ms) => round(ms)).join(' / ')} (remote / local)`,
  });
});
