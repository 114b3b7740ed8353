// PostgreSQL restarted in the middle of load, for every service with a database
// (shortener, accounts, idp; notes through the idp). The test runs its own
// PostgreSQL (the machine's is shared) and stops it with a fast shutdown, as a
// restart does. While it is down every request must get a JSON 503 promptly:
// no hang, no crash, no stack trace, no other status. Once it is up again the
// same service processes must answer normally within RECOVERY_BOUND_MS, and
// every write acknowledged before (201) must still be there.
// A last case freezes PostgreSQL instead (SIGSTOP: sockets open, no answers, as
// a hung server or a partitioned network looks): every answer must still come
// within the pool's timeouts, never hang.
import assert from 'node:assert/strict';
import { after, before, describe, test, type TestContext } from 'node:test';
import { QUERY_TIMEOUT_MARGIN_MS } from '../../src/kit/db.js';
import type { ServiceProcess } from '../helpers/process.js';
import { accountToken, createLink, createNote, NOTES_PASSWORD, notesUser, registerAccount } from './helpers/api.js';
import { percentile, reportFigures, round } from './helpers/figures.js';
import { jsonOf, keepAliveAgent, type Outcome, type RequestSpec, send, sleep, type Target } from './helpers/http.js';
import { queryOnce, type RestartablePostgres, startRestartablePostgres } from './helpers/postgres.js';
import {
  ACCOUNTS_ADMIN,
  ensureStopped,
  IDP_KEYS,
  startAccounts,
  startIdpProcess,
  startNotesProcess,
  startShortener,
} from './helpers/services.js';
import { uniqueEmail } from '../helpers/emails.js';
import { clientIps } from '../helpers/client-ips.js';

/** A refused connection is answered at once; a hung one within the pool's 3 s connectionTimeoutMillis. */
const OUTAGE_ANSWER_BOUND_MS = 5000;
const RECOVERY_BOUND_MS = 5000;
/**
 * A registration first waits for its bcrypt hash: cost 12 on low-priority workers, which the
 * request load of this test starves for seconds on 2 cores. Only then does it reach the
 * database, and from there the outage bound applies. So its bound is both together.
 */
const HASH_QUEUE_ALLOWANCE_MS = 15_000;
const HEALTHY_MS = 2000;
const DOWN_MS = 4000;
const AFTER_MS = 2000;
const CONCURRENCY = 16;

let postgres: RestartablePostgres;
const processes: ServiceProcess[] = [];

before(async () => {
  postgres = await startRestartablePostgres();
});

after(async () => {
  for (const p of processes) await ensureStopped(p);
  await postgres?.destroy();
});

async function started<T extends ServiceProcess>(proc: Promise<T>): Promise<T> {
  const p = await proc;
  processes.push(p);
  return p;
}

interface Planned {
  kind: string;
  target: Target;
  spec: RequestSpec;
  /** The statuses of a healthy answer. */
  healthy: number[];
  /** Waits for a bcrypt hash (seconds when many queue up), whatever the database does. */
  hashesPassword?: boolean;
}

type Phase = 'healthy' | 'stopping' | 'down' | 'starting' | 'up';

interface Answer {
  planned: Planned;
  phase: Phase;
  sentAt: number;
  answeredAt: number;
  outcome: Outcome;
}

/** The body of a 503: JSON, an object, and nothing that looks like a stack trace or a driver error. */
function unavailableProblem(o: Outcome): string | undefined {
  if (!o.ok) return o.error;
  if (o.status !== 503) return `status ${o.status}: ${o.text.slice(0, 300)}`;
  if (!String(o.headers['content-type']).startsWith('application/json')) return `content-type ${o.headers['content-type']}`;
  const body = jsonOf(o);
  if (typeof body !== 'object' || body === null) return `not a JSON object: ${o.text.slice(0, 300)}`;
  if (/stack|\(\/.*:\d+:\d+\)|ECONNREFUSED|127\.0\.0\.1|terminating connection|Connection terminated/i.test(o.text)) {
    return `leaks internals: ${o.text.slice(0, 300)}`;
  }
  return undefined;
}

function tally(answers: Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of answers) {
    const key = `${a.planned.kind} ${a.outcome.ok ? a.outcome.status : a.outcome.error}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/**
 * A closed-loop load through healthy → PostgreSQL stopped → down → started → up, each answer
 * checked against the phase its request was sent in:
 * - sent while healthy, stopping or starting: a healthy answer or a JSON 503;
 * - sent while down: a JSON 503 (or, for work that reached the database only after it was
 *   back, a healthy answer);
 * - every answer, whenever sent, within the fault's bound: never a hang;
 * - sent once up: healthy within RECOVERY_BOUND_MS of PostgreSQL accepting connections, and
 *   every request sent after the first healthy one is healthy too.
 * Returns every answer, for the caller's checks of what was acknowledged.
 */
interface Fault {
  /** Takes the database away (stop, or freeze), then brings it back. */
  begin(): Promise<void>;
  end(): Promise<void>;
  /** How long it stays away. */
  downMs: number;
  /** The bound on every answer while it is away. */
  answerBoundMs: number;
  /** Answers to requests sent while it is away, at least (so the test saw the fault at all). */
  minAnswersWhileDown: number;
}

const restart: Fault = {
  begin: () => postgres.stop(),
  end: () => postgres.start(),
  downMs: DOWN_MS,
  answerBoundMs: OUTAGE_ANSWER_BOUND_MS,
  minAnswersWhileDown: 20,
};

async function restartUnderLoad(
  t: TestContext,
  property: string,
  procs: ServiceProcess[],
  plan: (i: number) => Planned,
  fault: Fault = restart,
): Promise<Answer[]> {
  let phase: Phase = 'healthy';
  const answers: Answer[] = [];
  let upAt = 0;
  let recoveredAt = 0;
  let next = 0;
  const hardStop = Date.now() + HEALTHY_MS + fault.downMs + 60_000;
  const worker = async () => {
    const crashed = () => procs.some((p) => p.child.exitCode !== null || p.child.signalCode !== null);
    while (Date.now() < hardStop && !crashed() && !(recoveredAt > 0 && Date.now() - recoveredAt > AFTER_MS)) {
      const planned = plan(next++);
      const sentPhase = phase;
      const sentAt = Date.now();
      const outcome = await send(planned.target, planned.spec, 20_000);
      if (!recoveredAt && sentPhase === 'up' && outcome.ok && planned.healthy.includes(outcome.status)) recoveredAt = Date.now();
      answers.push({ planned, phase: sentPhase, sentAt, answeredAt: Date.now(), outcome });
    }
  };
  const load = Promise.all(Array.from({ length: CONCURRENCY }, worker));

  await sleep(HEALTHY_MS);
  phase = 'stopping';
  const stopBegan = Date.now();
  await fault.begin();
  const stoppedAt = Date.now();
  phase = 'down';
  await sleep(fault.downMs);
  phase = 'starting';
  const startBegan = Date.now();
  await fault.end();
  upAt = Date.now();
  phase = 'up';
  await load;

  const problems: string[] = [];
  const healthy = (a: Answer) => a.outcome.ok && a.planned.healthy.includes(a.outcome.status);
  for (const a of answers) {
    const label = `${a.planned.kind} sent ${a.phase}`;
    // No request waits longer than the bound, whenever it was sent (plus its time in the
    // password-hashing queue, which is slow by design, for one that hashes).
    const bound = fault.answerBoundMs + (a.planned.hashesPassword ? HASH_QUEUE_ALLOWANCE_MS : 0);
    if (a.outcome.ms >= bound) {
      problems.push(`${label}: answered after ${round(a.outcome.ms)} ms (${a.outcome.ok ? a.outcome.status : a.outcome.error})`);
    }
    if (a.phase === 'down') {
      // Work queued behind something slow (a bcrypt hash) may reach the database after it is back.
      const problem = healthy(a) && a.answeredAt >= startBegan ? undefined : unavailableProblem(a.outcome);
      if (problem) problems.push(`${label}: ${problem}`);
    } else if (a.phase === 'up' && recoveredAt > 0 && a.sentAt > recoveredAt) {
      if (!healthy(a))
        problems.push(`${label} after recovery: ${a.outcome.ok ? `${a.outcome.status} ${a.outcome.text.slice(0, 200)}` : a.outcome.error}`);
    } else if (!healthy(a)) {
      const problem = unavailableProblem(a.outcome);
      if (problem) problems.push(`${label}: ${problem}`);
    }
  }
  const down = answers.filter((a) => a.phase === 'down');
  const downMs = down.map((a) => a.outcome.ms);
  reportFigures(t, property, {
    requests: answers.length,
    answers_while_down: down.length,
    answers_by_phase: Object.fromEntries(
      (['healthy', 'stopping', 'down', 'starting', 'up'] as Phase[]).map((p) => [p, answers.filter((a) => a.phase === p).length]),
    ),
    statuses: tally(answers),
    postgres_away_ms: stoppedAt - stopBegan,
    postgres_back_ms: upAt - startBegan,
    outage_503_p50_ms: round(percentile(downMs, 50)),
    outage_503_max_ms: round(Math.max(0, ...downMs)),
    recovered_after_postgres_up_ms: recoveredAt > 0 ? recoveredAt - upAt : null,
  });
  for (const p of procs) {
    assert.equal(p.child.exitCode, null, `the service process is still running (never restarted); it printed: ${p.output().slice(-3000)}`);
  }
  assert.deepEqual(problems.slice(0, 10), [], `${problems.length} wrong answers`);
  assert.ok(down.length >= fault.minAnswersWhileDown, `too few requests while PostgreSQL was away: ${down.length}`);
  assert.ok(
    recoveredAt > 0 && recoveredAt - upAt < RECOVERY_BOUND_MS,
    `no healthy answer within ${RECOVERY_BOUND_MS} ms of PostgreSQL being up`,
  );
  for (const p of procs) {
    assert.doesNotMatch(p.output(), /"level":60|unhandled|uncaught/i, 'no crash logged');
  }
  return answers;
}

const acknowledged = (answers: Answer[], kind: string, status: number) =>
  answers
    .filter((a) => a.planned.kind === kind && a.outcome.ok && a.outcome.status === status)
    .map((a) => jsonOf(a.outcome) as Record<string, any>);

describe('PostgreSQL restart under load', { concurrency: false }, () => {
  test('shortener: 503 JSON while down, recovers by itself, no acknowledged link lost', async (t) => {
    const shortener = await started(startShortener(await postgres.database('shortener'), { trustProxy: '127.0.0.1' }));
    const target = { url: shortener.url, agent: keepAliveAgent(CONCURRENCY) };
    const ip = clientIps();
    const codes: string[] = [];
    for (let i = 0; i < 10; i++) codes.push(await createLink(target, ip(i)));
    const plan = (i: number): Planned => {
      const code = codes[i % codes.length]!;
      if (i % 10 < 3)
        return {
          kind: 'create',
          target,
          healthy: [201],
          spec: {
            method: 'POST',
            path: '/api/links',
            json: { url: `https://example.com/pg/${i}` },
            headers: { 'x-forwarded-for': ip(100 + i) },
          },
        };
      if (i % 10 < 8) return { kind: 'redirect', target, healthy: [302], spec: { path: `/${code}` } };
      return { kind: 'stats', target, healthy: [200], spec: { path: `/api/links/${code}` } };
    };
    const answers = await restartUnderLoad(t, 'PostgreSQL restart: shortener', [shortener], plan);
    (target.agent as { destroy(): void }).destroy();

    const created = acknowledged(answers, 'create', 201).map((b) => b.data.code as string);
    const stored = await queryOnce<{ code: string }>(await postgres.database('shortener'), 'SELECT code FROM links WHERE code = ANY($1)', [
      created,
    ]);
    assert.equal(stored.length, created.length, 'acknowledged links present after the restart');
    // Clicks committed before each 302 survive too.
    const redirected = new Map<string, number>();
    for (const a of answers)
      if (a.planned.kind === 'redirect' && a.outcome.ok && a.outcome.status === 302)
        redirected.set(a.planned.spec.path.slice(1), (redirected.get(a.planned.spec.path.slice(1)) ?? 0) + 1);
    const clicks = await queryOnce<{ code: string; clicks: number }>(
      await postgres.database('shortener'),
      'SELECT code, clicks FROM links WHERE code = ANY($1)',
      [codes],
    );
    for (const row of clicks)
      assert.ok(row.clicks >= (redirected.get(row.code) ?? 0), `${row.code}: ${row.clicks} clicks < ${redirected.get(row.code)} 302s`);
    t.diagnostic(`acknowledged links: ${created.length}, all present`);
  });

  test('accounts: 503 JSON while down, recovers by itself, no acknowledged registration lost', async (t) => {
    const databaseUrl = await postgres.database('accounts');
    const accounts = await started(startAccounts(databaseUrl));
    const target = { url: accounts.url, agent: keepAliveAgent(CONCURRENCY) };
    const email = uniqueEmail('pg');
    await registerAccount(target, email);
    const token = await accountToken(target, email);
    const adminToken = await accountToken(target, ACCOUNTS_ADMIN.email, ACCOUNTS_ADMIN.password);
    // Registrations hash with bcrypt cost 12 (~250 ms of a core each): 1 request in 200.
    const plan = (i: number): Planned => {
      if (i % 200 === 0)
        return {
          kind: 'register',
          target,
          healthy: [201],
          hashesPassword: true,
          spec: {
            method: 'POST',
            path: '/auth/register',
            json: { name: 'Restart', email: uniqueEmail('pg'), password: 'restart-password-1' },
          },
        };
      if (i % 10 === 1)
        return {
          kind: 'admin list',
          target,
          healthy: [200],
          spec: { path: '/admin/users?per_page=5', headers: { authorization: `Bearer ${adminToken}` } },
        };
      return { kind: 'me', target, healthy: [200], spec: { path: '/auth/me', headers: { authorization: `Bearer ${token}` } } };
    };
    const answers = await restartUnderLoad(t, 'PostgreSQL restart: accounts', [accounts], plan);
    (target.agent as { destroy(): void }).destroy();

    const registered = acknowledged(answers, 'register', 201).map((b) => b.data.email as string);
    assert.ok(registered.length > 0, 'some registrations were acknowledged');
    const stored = await queryOnce<{ email: string }>(databaseUrl, 'SELECT email FROM users WHERE email = ANY($1)', [registered]);
    assert.equal(stored.length, registered.length, 'acknowledged users present after the restart');
    t.diagnostic(`acknowledged registrations: ${registered.length}, all present`);
  });

  test('idp, and notes through it: 503 JSON while down, recovers by itself, no acknowledged user or note lost', async (t) => {
    const databaseUrl = await postgres.database('idp');
    const idp = await started(startIdpProcess(databaseUrl));
    const notes = await started(startNotesProcess(idp.url));
    const notesTarget = { url: notes.url, agent: keepAliveAgent(CONCURRENCY) };
    const idpTarget = { url: idp.url, agent: keepAliveAgent(CONCURRENCY) };
    const user = await notesUser(notesTarget, uniqueEmail('pg'));
    const first = await createNote(notesTarget, user.token, 'before the restart');
    const auth = { authorization: `Bearer ${user.token}` };
    const plan = (i: number): Planned => {
      const slot = i % 20;
      if (slot === 0)
        return {
          kind: 'notes register',
          target: notesTarget,
          healthy: [201],
          hashesPassword: true,
          spec: { method: 'POST', path: '/auth/register', json: { email: uniqueEmail('pg'), password: NOTES_PASSWORD } },
        };
      if (slot < 6)
        return {
          kind: 'notes create',
          target: notesTarget,
          healthy: [201],
          spec: { method: 'POST', path: '/notes', json: { title: `note ${i}` }, headers: auth },
        };
      if (slot < 12) return { kind: 'notes list', target: notesTarget, healthy: [200], spec: { path: '/notes', headers: auth } };
      // The idp's own API, as supabase-js calls it.
      const keyed = { apikey: IDP_KEYS.publishable, 'x-supabase-api-version': '2024-01-01', ...auth };
      if (slot < 16) return { kind: 'idp user', target: idpTarget, healthy: [200], spec: { path: '/auth/v1/user', headers: keyed } };
      return { kind: 'idp rest', target: idpTarget, healthy: [200], spec: { path: '/rest/v1/notes?select=id&limit=5', headers: keyed } };
    };
    const answers = await restartUnderLoad(t, 'PostgreSQL restart: idp + notes', [idp, notes], plan);
    for (const target of [notesTarget, idpTarget]) (target.agent as { destroy(): void }).destroy();

    const users = acknowledged(answers, 'notes register', 201).map((b) => b.id as string);
    const noteIds = [first, ...acknowledged(answers, 'notes create', 201).map((b) => b.id as number)];
    const storedUsers = await queryOnce<{ n: number }>(
      databaseUrl,
      'SELECT count(*)::int AS n FROM auth.users WHERE id = ANY($1::uuid[])',
      [users],
    );
    const storedNotes = await queryOnce<{ n: number }>(
      databaseUrl,
      'SELECT count(*)::int AS n FROM public.notes WHERE id = ANY($1::bigint[])',
      [noteIds],
    );
    assert.equal(storedUsers[0]!.n, users.length, 'acknowledged users present after the restart');
    assert.equal(storedNotes[0]!.n, noteIds.length, 'acknowledged notes present after the restart');
    t.diagnostic(`acknowledged users: ${users.length}, notes: ${noteIds.length}, all present`);
  });

  test('PostgreSQL frozen (answers nothing): shortener, idp and notes answer 503 JSON within the query timeout, never hang; recover', async (t) => {
    const shortener = await started(startShortener(await postgres.database('shortener'), { trustProxy: '127.0.0.1' }));
    const idp = await started(startIdpProcess(await postgres.database('idp')));
    const notes = await started(startNotesProcess(idp.url));
    const shortenerTarget = { url: shortener.url, agent: keepAliveAgent(CONCURRENCY) };
    const idpTarget = { url: idp.url, agent: keepAliveAgent(CONCURRENCY) };
    const notesTarget = { url: notes.url, agent: keepAliveAgent(CONCURRENCY) };
    const ip = clientIps();
    const codes: string[] = [];
    for (let i = 0; i < 10; i++) codes.push(await createLink(shortenerTarget, ip(i)));
    const user = await notesUser(notesTarget, uniqueEmail('frozen'));
    const auth = { authorization: `Bearer ${user.token}` };
    const keyed = { apikey: IDP_KEYS.publishable, 'x-supabase-api-version': '2024-01-01', ...auth };
    const plan = (i: number): Planned => {
      const code = codes[i % codes.length]!;
      switch (i % 10) {
        case 0:
          return {
            kind: 'create',
            target: shortenerTarget,
            healthy: [201],
            spec: {
              method: 'POST',
              path: '/api/links',
              json: { url: `https://example.com/frozen/${i}` },
              headers: { 'x-forwarded-for': ip(100 + i) },
            },
          };
        case 1:
        case 2:
          return { kind: 'redirect', target: shortenerTarget, healthy: [302], spec: { path: `/${code}` } };
        case 3:
          return { kind: 'stats', target: shortenerTarget, healthy: [200], spec: { path: `/api/links/${code}` } };
        case 4:
        case 5:
          return {
            kind: 'idp rest',
            target: idpTarget,
            healthy: [200],
            spec: { path: '/rest/v1/notes?select=id&limit=5', headers: keyed },
          };
        case 6:
          return { kind: 'idp user', target: idpTarget, healthy: [200], spec: { path: '/auth/v1/user', headers: keyed } };
        case 7:
          return {
            kind: 'notes create',
            target: notesTarget,
            healthy: [201],
            spec: { method: 'POST', path: '/notes', json: { title: `frozen ${i}` }, headers: auth },
          };
        default:
          return { kind: 'notes list', target: notesTarget, healthy: [200], spec: { path: '/notes', headers: auth } };
      }
    };
    // A frozen server keeps its sockets: new connections hang until connectionTimeoutMillis (3 s),
    // statements on open ones until the client's query timeout (statement_timeout + margin). A
    // click may wait for one of each (its batch queued behind batches that time out, then a new
    // connection), hence the bound, plus 5 s for a machine busy with other suites (a click
    // answered 1 ms past a 2 s allowance there). It stays frozen longer than the bound, so a hang
    // cannot hide.
    const queryTimeoutMs = 10_000 + QUERY_TIMEOUT_MARGIN_MS;
    const answerBoundMs = queryTimeoutMs + 3000 + 5000;
    const freeze: Fault = {
      begin: async () => postgres.freeze(),
      end: async () => postgres.thaw(),
      downMs: answerBoundMs + 3000,
      answerBoundMs,
      // Each of the 16 workers is stuck for up to the bound.
      minAnswersWhileDown: 8,
    };
    const answers = await restartUnderLoad(t, 'PostgreSQL frozen: shortener, idp, notes', [shortener, idp, notes], plan, freeze);
    for (const target of [shortenerTarget, idpTarget, notesTarget]) (target.agent as { destroy(): void }).destroy();
    const slowest = Math.max(...answers.filter((a) => a.phase === 'down').map((a) => a.outcome.ms));
    t.diagnostic(`slowest answer while frozen: ${round(slowest)} ms (query timeout ${queryTimeoutMs} ms)`);
  });
});
