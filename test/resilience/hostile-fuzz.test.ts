// HTTP fuzz of each service running as its own process (as users run it): at least 20,000
// hostile requests per service (FUZZ_REQUESTS to change it), from a seeded PRNG (the seed is
// printed; FUZZ_SEED=<seed> replays the run). Asserted for every response: no 5xx, a body in the
// service's documented error envelope, no stack trace; for the run: no request left hanging,
// the process alive afterwards with /healthz and /readyz answering 200, and no error-level log
// line. Nothing is down during the run, so no 503 is acceptable either.
import assert from 'node:assert/strict';
import { after, before, test, type TestContext } from 'node:test';
import type { TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { reportFigures, round } from './helpers/figures.js';
import {
  ACCOUNTS_ADMIN,
  IDP_KEYS,
  ensureStopped,
  startAccounts,
  startIdpProcess,
  startNotesProcess,
  startShortener,
} from './helpers/services.js';
import { checkResponseBody, type ServiceName } from './fuzz/envelopes.js';
import { createRng, runSeed } from './fuzz/prng.js';
import { type HttpOutcome, keepAliveClient, rawExchange } from './fuzz/raw-http.js';
import { FUZZ_MAIL_ADDRESS, type FuzzCase, type FuzzContext, requestGenerator, toRawBytes } from './fuzz/requests.js';
import { idpDatabase } from '../helpers/idp.js';
import { clientIps } from '../helpers/client-ips.js';
import { shortenerDatabase } from '../helpers/shortener.js';
import { accountsDatabase } from '../helpers/accounts.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';
import { startAll } from '../helpers/services.js';

const seed = runSeed();
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 20_000);
const CONCURRENCY = 16;
/** Share of requests sent as raw bytes on a fresh connection. */
const RAW_SHARE = 0.08;
const REDIS_URL = process.env.REDIS_URL;

const dbs: TestDatabase[] = [];
const FUZZ_SHORTENER_ADMIN_KEY = `fuzz-admin-${'k'.repeat(32)}`;
const procs: Record<ServiceName, ServiceProcess | undefined> = {
  shortener: undefined,
  accounts: undefined,
  idp: undefined,
  notes: undefined,
};
let smtp: TestSmtp | undefined;
/** Each service's sender, so the mails of one run are told from the other's. */
const MAIL_FROM = { accounts: 'accounts-fuzz@example.com', idp: 'idp-fuzz@example.com' } as Record<ServiceName, string>;

before(async () => {
  const [shortenerDb, accountsDb, idpDb] = await Promise.all([shortenerDatabase(), accountsDatabase(), idpDatabase()]);
  dbs.push(shortenerDb, accountsDb, idpDb);
  // X-Forwarded-For is trusted from 127.0.0.1 so the fuzz can vary the client address (and the
  // rate limiters' keys), and Redis holds the counters when CI provides it, as in production.
  const redis: Record<string, string> = REDIS_URL ? { REDIS_URL } : {};
  // A real SMTP server behind the mail routes: without SMTP_URL accounts answers them 503 (and the
  // idp drops its mails), so their real code (the outbox, the worker, the limits) would not run.
  smtp = await startSmtp();
  const mail = (service: ServiceName) => ({ SMTP_URL: smtp!.url, MAIL_FROM: MAIL_FROM[service] });
  [procs.shortener, procs.accounts, procs.idp] = await startAll([
    startShortener(shortenerDb.url, {
      trustProxy: '127.0.0.1',
      redisUrl: REDIS_URL,
      env: { SHORTENER_ADMIN_KEY: FUZZ_SHORTENER_ADMIN_KEY },
    }),
    startAccounts(accountsDb.url, { env: { TRUST_PROXY: '127.0.0.1', ...redis, ...mail('accounts') } }),
    startIdpProcess(idpDb.url, { env: mail('idp') }),
  ]);
  // Nothing is down here, only slow: a sign-up waits for its cost-10 hash on the idp's low-priority
  // workers, which a loaded 2-core machine can starve past notes' default 5 s deadline (notes then
  // answers 503, rightly for an idp that slow). The deadline gets the same room as the answer bound.
  procs.notes = await startNotesProcess(procs.idp.url, { env: { IDP_TIMEOUT_MS: '55000' } });
});

after(async () => {
  for (const proc of Object.values(procs)) await ensureStopped(proc);
  for (const db of dbs) await db.drop();
  await smtp?.close();
});

// ---- the run -----------------------------------------------------------------------------------

interface RunStats {
  sent: number;
  raw: number;
  statuses: Record<string, number>;
  /** Bodies written by Fastify or Node outside the service's handlers (see envelopes.ts). */
  framework: number;
  /** HTML error pages (the shortener's "Link not found" stats page). */
  pages: number;
  /** Raw requests the server answered by closing the connection. */
  closedRaw: number;
  /** Keep-alive requests whose connection failed, sent again alone on a fresh connection. */
  resent: number;
  failures: string[];
  failureCount: number;
}

/** What is wrong with this answer to this request (undefined: nothing), and whether Fastify wrote its body. */
function judge(service: ServiceName, c: FuzzCase, o: HttpOutcome): { problem?: string; framework?: boolean; page?: boolean } {
  const method = c.kind === 'http' ? c.req.method : c.method;
  const path = c.kind === 'http' ? c.req.path : c.path;
  switch (o.kind) {
    case 'timeout':
      return { problem: 'no answer within the timeout' };
    case 'client-refused':
      return { problem: `the test client refused to send it (${o.detail})` };
    case 'closed':
      return c.kind === 'raw' ? {} : { problem: `connection closed without a response (${o.detail})` };
    case 'response': {
      if (o.status >= 500) return { problem: `${o.status}: ${o.text.slice(0, 200)}` };
      const verdict = checkResponseBody(service, path, o.status, o.contentType, o.text, method);
      if (verdict.ok) return { framework: verdict.kind === 'framework', page: verdict.kind === 'page' };
      // Node's HTTP server refuses some malformed requests itself, with an empty body (no Host on
      // HTTP/1.1: 400; an Expect it does not know: 417).
      if (c.kind === 'raw' && o.text === '' && [400, 408, 417, 431, 505].includes(o.status)) return { framework: true };
      return { problem: verdict.problem };
    }
  }
}

// Routes that may run a cost-12 bcrypt queue (invite and generate_link hash a random password,
// notes' /auth/password has the idp hash the new one) behind other hashes on low-priority workers: on a
// loaded 2-core machine that queue can pass 15 s. The bound only tells a hang from slowness.
const HASHING_ROUTE = /^\/auth\/(login|register|password)(\?|$)|^\/auth\/v1\/(signup|token|admin\/users|invite|admin\/generate_link)(\?|$)/;
function answerBoundMs(req: { method: string; path: string }): number {
  return req.method === 'POST' && HASHING_ROUTE.test(req.path) ? 60_000 : 15_000;
}

async function fuzz(service: ServiceName, proc: ServiceProcess, ctx: FuzzContext): Promise<RunStats & { seconds: number; hashed: number }> {
  const rng = createRng(seed).fork(service);
  const ip = clientIps();
  let n = 0;
  const generator = requestGenerator(service, rng, ctx, {
    hashBudget: service === 'accounts' ? 8 : 24,
    rawShare: RAW_SHARE,
    // Mostly a new address per request, so rate limits and login throttles do not answer for the validators.
    clientIp: () => (rng.chance(0.6) ? ip(n++) : ip(0)),
  });
  const client = keepAliveClient(proc.url, CONCURRENCY);
  const stats: RunStats = { sent: 0, raw: 0, statuses: {}, framework: 0, pages: 0, closedRaw: 0, resent: 0, failures: [], failureCount: 0 };
  const started = performance.now();
  let index = 0;
  const worker = async () => {
    while (index < REQUESTS) {
      const i = index++;
      const c = generator.next();
      let outcome =
        c.kind === 'http'
          ? await client.send(c.req, answerBoundMs(c.req))
          : await rawExchange(proc.port, c.bytes, { halfCloseAfterMs: c.incomplete ? 0 : 2_000 });
      if (c.kind === 'http' && outcome.kind === 'closed') {
        // A shared keep-alive connection can fail for reasons of the client's own (a socket the
        // server closed after an earlier request, reused at that instant). The same request alone on
        // a fresh connection says what the server really does with it; that answer is judged.
        stats.resent += 1;
        outcome = await rawExchange(proc.port, toRawBytes(c.req), { halfCloseAfterMs: 10_000 });
        if (outcome.kind === 'closed') outcome = { kind: 'closed', detail: `also on a fresh connection: ${outcome.detail}` };
      }
      stats.sent += 1;
      if (c.kind === 'raw') stats.raw += 1;
      const key = outcome.kind === 'response' ? String(outcome.status) : outcome.kind;
      stats.statuses[key] = (stats.statuses[key] ?? 0) + 1;
      if (outcome.kind === 'closed' && c.kind === 'raw') stats.closedRaw += 1;
      const { problem, framework, page } = judge(service, c, outcome);
      if (framework) stats.framework += 1;
      if (page) stats.pages += 1;
      if (problem !== undefined) {
        stats.failureCount += 1;
        if (stats.failures.length < 25) {
          const shown =
            c.kind === 'http'
              ? `${c.req.method} ${c.req.path.slice(0, 160)} body=${(c.req.body?.toString('utf8') ?? '').slice(0, 120)}`
              : JSON.stringify(c.bytes.toString('latin1').slice(0, 160));
          stats.failures.push(`#${i} [${c.label}] ${shown} -> ${problem}`);
        }
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  } finally {
    client.close();
  }
  return { ...stats, seconds: (performance.now() - started) / 1000, hashed: generator.hashed };
}

async function assertHealthy(proc: ServiceProcess, name: string): Promise<void> {
  assert.equal(proc.child.exitCode, null, `${name} exited during the fuzz: ${proc.output().slice(-2000)}`);
  assert.equal(proc.child.signalCode, null, `${name} was killed during the fuzz`);
  for (const path of ['/healthz', '/readyz']) {
    const res = await fetch(`${proc.url}${path}`);
    assert.equal(res.status, 200, `${name} ${path} after the fuzz: ${await res.text()}`);
  }
  // The processes log at warn: an error-level line is an unhandled failure, even if it was answered.
  const errors = proc
    .output()
    .split('\n')
    .filter((line) => /"level":(50|60)/.test(line));
  assert.deepEqual(errors.slice(0, 5), [], `${name} logged errors during the fuzz`);
}

/** Mails the SMTP server accepted from this sender to the run's known address. */
const mailsToKnownAddress = (from: string) =>
  smtp!.received.filter((m) => m.from === from && m.to.toLowerCase() === FUZZ_MAIL_ADDRESS).length;

/** The mail path works through the attack: the outbox worker delivered the known address's mail. */
async function assertMailed(proc: ServiceProcess, from: string, name: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (mailsToKnownAddress(from) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  const mailLines = proc
    .output()
    .split('\n')
    .filter((line) => /mail/i.test(line))
    .slice(-10);
  assert.ok(
    mailsToKnownAddress(from) > 0,
    `${name} sent no mail to ${FUZZ_MAIL_ADDRESS} during the fuzz; its last lines about mail:\n${mailLines.join('\n')}`,
  );
}

async function runAndReport(t: TestContext, service: ServiceName, ctx: FuzzContext): Promise<void> {
  const proc = procs[service]!;
  const mailsBefore = smtp!.received.length;
  const result = await fuzz(service, proc, ctx);
  reportFigures(t, `HTTP fuzz: ${service}`, {
    seed,
    requests: result.sent,
    raw: result.raw,
    seconds: round(result.seconds),
    rps: round(result.sent / result.seconds, 0),
    statuses: result.statuses,
    frameworkBodies: result.framework,
    notFoundPages: result.pages,
    rawClosedWithoutResponse: result.closedRaw,
    resentOnFreshConnection: result.resent,
    hashingRequests: result.hashed,
    mailsDelivered: smtp!.received.length - mailsBefore,
    failures: result.failureCount,
  });
  assert.ok(result.sent >= REQUESTS, `only ${result.sent} requests were sent`);
  assert.equal(result.failureCount, 0, `seed ${seed}: ${result.failureCount} bad answers, first ones:\n${result.failures.join('\n')}`);
  await assertHealthy(proc, service);
}

// ---- per service -------------------------------------------------------------------------------

async function json(url: string, method: string, body: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(url, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

test(`shortener survives ${REQUESTS} hostile requests: no 5xx, envelope bodies, still healthy`, async (t) => {
  const url = procs.shortener!.url;
  const codes: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await json(
      `${url}/api/links`,
      'POST',
      { url: `https://example.com/seed-${i}` },
      { 'x-forwarded-for': `10.99.0.${i + 1}` },
    );
    codes.push(created.data.code);
  }
  await runAndReport(t, 'shortener', { codes, shortenerAdminKey: FUZZ_SHORTENER_ADMIN_KEY });
});

test(`accounts survives ${REQUESTS} hostile requests: no 5xx, envelope bodies, still healthy`, async (t) => {
  const url = procs.accounts!.url;
  const email = `fuzz-user-${seed}@example.com`;
  await json(`${url}/auth/register`, 'POST', { name: 'Fuzz User', email, password: 'fuzz-user-password' });
  const headers = { 'x-forwarded-for': '10.98.0.1' };
  const user = await json(`${url}/auth/login`, 'POST', { email, password: 'fuzz-user-password' }, headers);
  const admin = await json(`${url}/auth/login`, 'POST', ACCOUNTS_ADMIN, headers);
  await json(`${url}/auth/register`, 'POST', { name: 'Fuzz Mail', email: FUZZ_MAIL_ADDRESS, password: 'fuzz-mail-password' }, headers);
  // One mail requested before the attack, while no limit is spent: whether the seeded requests
  // reach the known address before a per-address or per-client limit does is luck.
  await json(`${url}/auth/password-reset`, 'POST', { email: FUZZ_MAIL_ADDRESS }, headers);
  await runAndReport(t, 'accounts', { accountsTokens: [user.data.token, admin.data.token] });
  await assertMailed(procs.accounts!, MAIL_FROM.accounts, 'accounts');
});

test(`idp survives ${REQUESTS} hostile requests: no 5xx, Supabase/PostgREST/gateway bodies, still healthy`, async (t) => {
  const url = procs.idp!.url;
  const gateway = { apikey: IDP_KEYS.secret, 'x-supabase-api-version': '2024-01-01' };
  const email = `fuzz-idp-${seed}@example.com`;
  await json(`${url}/auth/v1/admin/users`, 'POST', { email, password: 'fuzz-idp-password', email_confirm: true }, gateway);
  const session = await json(
    `${url}/auth/v1/token?grant_type=password`,
    'POST',
    { email, password: 'fuzz-idp-password' },
    { ...gateway, apikey: IDP_KEYS.publishable },
  );
  await json(
    `${url}/auth/v1/admin/users`,
    'POST',
    { email: FUZZ_MAIL_ADDRESS, password: 'fuzz-mail-password', email_confirm: true },
    gateway,
  );
  // As for accounts: one mail requested before the attack can spend the per-client limit (the
  // idp here sees every request from 127.0.0.1, and recover shares the sign-up limit).
  await json(`${url}/auth/v1/recover`, 'POST', { email: FUZZ_MAIL_ADDRESS }, { ...gateway, apikey: IDP_KEYS.publishable });
  await runAndReport(t, 'idp', {
    idpToken: session.access_token,
    idpRefreshToken: session.refresh_token,
    publishableKey: IDP_KEYS.publishable,
    secretKey: IDP_KEYS.secret,
  });
  await assertMailed(procs.idp!, MAIL_FROM.idp, 'idp');
});

test(`notes survives ${REQUESTS} hostile requests: no 5xx, {message} bodies, still healthy`, async (t) => {
  const url = procs.notes!.url;
  const email = `fuzz-notes-${seed}@example.com`;
  await json(`${url}/auth/register`, 'POST', { email, password: 'fuzz-notes-password' });
  const session = await json(`${url}/auth/login`, 'POST', { email, password: 'fuzz-notes-password' });
  const noteIds: number[] = [];
  for (let i = 0; i < 3; i++) {
    const note = await json(`${url}/notes`, 'POST', { title: `seed ${i}` }, { authorization: `Bearer ${session.access_token}` });
    noteIds.push(note.id);
  }
  await runAndReport(t, 'notes', { idpToken: session.access_token, noteIds });
  // The idp behind notes took all of that traffic too.
  await assertHealthy(procs.idp!, 'idp (behind notes)');
});
