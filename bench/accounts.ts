import { createHmac, createSecretKey, type KeyObject, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { availableParallelism, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import bcrypt from 'bcrypt';
import { BCRYPT_COST } from '../src/accounts/passwords.js';
import { createPool } from '../src/kit/db.js';
import { isCanonicalCompactJws } from '../src/kit/jws.js';
import {
  type LoadResult,
  type Measured,
  alternate,
  BENCH_ROUNDS,
  contextRow,
  cpuSeconds,
  databaseBackendPids,
  defaultGenerator,
  freshBenchDatabase,
  load,
  measure,
  ratio,
  referenceConfig,
  referenceRow,
  startCeiling,
  startReference,
  startService,
} from './lib.js';

// bcrypt is what bounds the accounts service. These are measured side by side in one run:
//  - the bcrypt ceiling: cores ÷ the time of one cost-12 hash, the most logins/s this machine can do;
//  - a login storm (2 × cores concurrent logins, 10 s) against that ceiling;
//  - /auth/me alone, beside a bare node:http JSON server (context), and during a storm (its p99
//    reported beside its p99 alone, without a target);
//  - unknown-email vs wrong-password logins, which must take the same time;
//  - POST /auth/refresh: each request rotates its session's refresh token, so
//    every client chains its own session (the next request sends what the last returned).

//  - /auth/me beside a minimal node:http reference that does the same work: the bearer header's
//    form, the HS256 check with node:crypto (the algorithm pinned before the key is used, the MAC
//    compared in constant time, exp, iat, id and role checked), the same one-row read of the
//    caller's account (the same named statement), the cut-off and ban checks, the same JSON body
//    (compared before the runs), on a pool of the same size. Alternating rounds, medians.

type Row = Record<string, string | number>;

const REFERENCE_FLAG = '--accounts-reference';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface ReferenceConfig {
  databaseUrl: string;
  jwtSecret: string;
}

const segment = (text: string): Record<string, unknown> | undefined => {
  try {
    const value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
};

/** HS256 only (the header's alg read before the key is used), MAC in constant time, exp not reached. */
function verifyHs256(token: string, key: KeyObject): { id: string; iat: number } | undefined {
  if (!isCanonicalCompactJws(token)) return undefined;
  const [encodedHeader, encodedPayload, encodedSignature] = token.split('.') as [string, string, string];
  const header = segment(encodedHeader);
  if (header?.alg !== 'HS256' || Object.hasOwn(header, 'crit')) return undefined;
  const expected = createHmac('sha256', key).update(`${encodedHeader}.${encodedPayload}`).digest();
  const given = Buffer.from(encodedSignature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  const payload = segment(encodedPayload);
  const now = Math.floor(Date.now() / 1000);
  const { exp, iat, id, role } = payload ?? {};
  if (typeof exp !== 'number' || exp <= now || typeof iat !== 'number' || iat > now + 60) return undefined;
  if (typeof id !== 'string' || !UUID.test(id) || (role !== 'user' && role !== 'admin')) return undefined;
  return { id, iat };
}

async function serveReference(config: ReferenceConfig & { port: number }): Promise<void> {
  const pool = createPool(config.databaseUrl, { max: 20, applicationName: 'accounts-reference' });
  const key = createSecretKey(Buffer.from(config.jwtSecret));
  const answer = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify(body));
  };
  const fail = (res: http.ServerResponse, status: number, message: string) =>
    answer(res, status, { status, response: http.STATUS_CODES[status], message });
  http
    .createServer(async (req, res) => {
      try {
        const header = req.headers.authorization;
        if (req.url !== '/auth/me' || typeof header !== 'string' || !header.startsWith('Bearer ')) return fail(res, 401, 'No token');
        const claims = verifyHs256(header.slice('Bearer '.length), key);
        if (!claims) return fail(res, 401, 'Invalid token');
        const { rows } = await pool.query({
          name: 'accounts-find-account-by-id',
          text: 'SELECT id, name, email, role, email_verified_at, created_at, updated_at, access_tokens_from, banned_at FROM users WHERE id = $1',
          values: [claims.id],
        });
        const row = rows[0];
        if (!row) return fail(res, 404, 'User not found');
        const cutOff = row.access_tokens_from ? Math.floor(row.access_tokens_from.getTime() / 1000) : 0;
        if (claims.iat < cutOff || row.banned_at !== null) return fail(res, 401, 'Invalid token');
        answer(res, 200, {
          status: 200,
          response: 'OK',
          message: 'User profile retrieved successfully',
          data: {
            id: row.id,
            name: row.name,
            email: row.email,
            role: row.role,
            emailVerified: row.email_verified_at !== null,
            createdAt: row.created_at.toISOString(),
            updatedAt: row.updated_at.toISOString(),
          },
        });
      } catch {
        fail(res, 503, 'Service unavailable');
      }
    })
    .listen(config.port, '127.0.0.1');
}

if (process.argv.includes(REFERENCE_FLAG)) await serveReference(referenceConfig<ReferenceConfig>());

const cores = availableParallelism();
const PASSWORD = 'bench password 1';

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};
const median = (values: number[]) => percentile(values, 50);
const pct = (r: number) => `${(r * 100).toFixed(0)}%`;
const verdict = (ok: boolean) => (ok ? 'yes' : 'NO');
const round1 = (n: number) => Number(n.toFixed(1));

async function post(url: string, body: unknown): Promise<{ status: number; token?: string; refreshToken?: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = (await res.json()) as { data?: { token?: string; refresh_token?: string } };
  return { status: res.status, token: json.data?.token, refreshToken: json.data?.refresh_token };
}

/**
 * One client per session, each sending the refresh token its last answer gave,
 * back to back for `seconds`. A refresh token works once, so the chain is the only
 * honest load: replaying one token would measure the reuse path instead.
 */
async function refreshChains(url: string, refreshTokens: string[], seconds: number): Promise<StormResult> {
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  await Promise.all(
    refreshTokens.map(async (first) => {
      let current = first;
      while (performance.now() < deadline) {
        const t = performance.now();
        const { status, refreshToken } = await post(url, { refresh_token: current });
        latencies.push(performance.now() - t);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (!refreshToken) throw new Error(`refresh answered ${status}`);
        current = refreshToken;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return { rps: latencies.length / elapsed, p50: median(latencies), p99: percentile(latencies, 99), statuses };
}

interface StormResult {
  rps: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
}

/**
 * `workers` clients that log in back to back for `seconds`. Counted here rather
 * than by autocannon: at a few logins per second, the requests a timed run
 * drops when it stops would be a visible share of the total.
 */
async function loginStorm(url: string, body: unknown, workers: number, seconds: number): Promise<StormResult> {
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < deadline) {
        const t = performance.now();
        const { status } = await post(url, body);
        latencies.push(performance.now() - t);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return { rps: latencies.length / elapsed, p50: median(latencies), p99: percentile(latencies, 99), statuses };
}

async function timedFailedLogin(url: string, email: string): Promise<number> {
  const start = performance.now();
  const { status } = await post(`${url}/auth/login`, { email, password: 'not the password' });
  const took = performance.now() - start;
  if (status !== 401) throw new Error(`expected 401, got ${status}`);
  return took;
}

export async function run(ctx: { adminUrl: string }): Promise<Record<string, Row[]>> {
  const databaseUrl = await freshBenchDatabase(ctx.adminUrl, 'bench_accounts');
  const jwtSecret = randomBytes(48).toString('base64url');

  // In-process counters (no REDIS_URL) and no admin: a bench run starts from nothing.
  const service = await startService('src/accounts/server.ts', {
    DATABASE_URL: databaseUrl,
    JWT_SECRET: jwtSecret,
    REDIS_URL: '',
    ADMIN_EMAIL: '',
    ADMIN_PASSWORD: '',
  });
  // The same service at the production default log level (info: one access line a request), for
  // /auth/me beside the same reference (the rows above it: warn).
  const serviceAtInfo = await startService('src/accounts/server.ts', {
    DATABASE_URL: databaseUrl,
    JWT_SECRET: jwtSecret,
    REDIS_URL: '',
    ADMIN_EMAIL: '',
    ADMIN_PASSWORD: '',
    LOG_LEVEL: 'info',
  });
  const ceiling = await startCeiling('json');
  let reference: Awaited<ReturnType<typeof startReference>> | undefined;
  const loadAtStart = loadavg()[0]!;
  const rows: Row[] = [];
  try {
    // Four accounts: wrong-password attempts rotate over them so none reaches the per-account limit.
    const emails = Array.from({ length: 4 }, (_, i) => `bench-${i}-${randomBytes(4).toString('hex')}@example.com`);
    for (const [i, email] of emails.entries()) {
      const res = await post(`${service.url}/auth/register`, { name: `Bench ${i}`, email, password: PASSWORD });
      if (res.status !== 201) throw new Error(`register failed: ${res.status}`);
    }
    const token = (await post(`${service.url}/auth/login`, { email: emails[0], password: PASSWORD })).token;
    if (!token) throw new Error('login failed');

    // 1. The bcrypt ceiling, in this process, one hash at a time.
    const hashes = 8;
    const hashStart = performance.now();
    for (let i = 0; i < hashes; i++) await bcrypt.hash(`password-${i}`, BCRYPT_COST);
    const msPerHash = (performance.now() - hashStart) / hashes;
    const bcryptCeiling = (cores * 1000) / msPerHash;
    rows.push({
      run: `bcrypt cost ${BCRYPT_COST}: ${hashes} hashes in a row -> ceiling`,
      'req/s': round1(bcryptCeiling),
      'p50 ms': round1(msPerHash),
      'p99 ms': '',
      ratio: `${cores} cores / ${msPerHash.toFixed(0)} ms per hash`,
      target: '',
      met: '',
    });

    // The same hashing with `cores` hashes at once, in this process: what the
    // machine really gives when every core hashes (a VM's vCPUs may not scale).
    const parallelStart = performance.now();
    for (let i = 0; i < hashes / cores; i++) {
      await Promise.all(Array.from({ length: cores }, (_, j) => bcrypt.hash(`password-${i}-${j}`, BCRYPT_COST)));
    }
    const parallelRate = (Math.floor(hashes / cores) * cores * 1000) / (performance.now() - parallelStart);
    rows.push({
      run: `bcrypt cost ${BCRYPT_COST}: ${cores} at a time (measured parallel ceiling)`,
      'req/s': round1(parallelRate),
      'p50 ms': '',
      'p99 ms': '',
      ratio: `${(parallelRate / (1000 / msPerHash)).toFixed(2)}x one core`,
      target: '',
      met: '',
    });

    // 2. The login storm alone.
    const loginUrl = `${service.url}/auth/login`;
    const credentials = { email: emails[1], password: PASSWORD };
    const storm = await loginStorm(loginUrl, credentials, 2 * cores, 10);
    const stormOk = Object.keys(storm.statuses).every((s) => s === '200');
    rows.push({
      run: `login storm: ${2 * cores} concurrent, 10 s`,
      'req/s': round1(storm.rps),
      'p50 ms': Math.round(storm.p50),
      'p99 ms': Math.round(storm.p99),
      ratio: `${pct(ratio(storm.rps, bcryptCeiling))} of bcrypt ceiling (${pct(ratio(storm.rps, parallelRate))} of measured parallel)`,
      target: '>= 90%',
      met: verdict(ratio(storm.rps, bcryptCeiling) >= 0.9 && stormOk),
    });

    // 3. /auth/me alone beside the bare node:http JSON ceiling (its rounds first, for context) and
    // the reference (alternating rounds with the service), medians, so a burst of outside load hits
    // both alike. Its targets are those against the reference; the bare server has none.
    const generator = defaultGenerator();
    const seconds = Number(process.env.BENCH_SECONDS ?? 10);
    const me = { url: `${service.url}/auth/me`, headers: { authorization: `Bearer ${token}` }, connections: 10, generator };
    const only200 = (r: LoadResult) => Object.keys(r.statusCounts).every((s) => s === '200') && r.errors === 0;
    reference = await startReference(fileURLToPath(import.meta.url), REFERENCE_FLAG, { databaseUrl, jwtSecret } satisfies ReferenceConfig);
    const [own, theirs] = await Promise.all(
      [service, reference].map((s) =>
        fetch(`${s.url}/auth/me`, { headers: me.headers }).then(async (r) => `${r.status} ${await r.text()}`),
      ),
    );
    if (own !== theirs) throw new Error(`the service and the reference answer /auth/me differently:\n${own}\n${theirs}`);
    const backends = () => databaseBackendPids(ctx.adminUrl, 'bench_accounts');
    const bareRuns: Measured[] = [];
    for (let i = 0; i < BENCH_ROUNDS; i++) {
      bareRuns.push(await measure({ url: ceiling.url, connections: 10, durationSeconds: seconds, generator }, { server: ceiling.pid }));
    }
    const meRuns = await alternate(
      () => measure({ ...me, url: `${reference!.url}/auth/me`, durationSeconds: seconds }, { server: reference!.pid, backends }),
      async () => {
        const m = await measure({ ...me, durationSeconds: seconds }, { server: service.pid, backends });
        if (!only200(m.r)) throw new Error(`/auth/me answered ${JSON.stringify(m.r.statusCounts)}`);
        return m;
      },
    );
    const meAtInfo = await alternate(
      () => measure({ ...me, url: `${reference!.url}/auth/me`, durationSeconds: seconds }, { server: reference!.pid, backends }),
      () => measure({ ...me, url: `${serviceAtInfo.url}/auth/me`, durationSeconds: seconds }, { server: serviceAtInfo.pid, backends }),
    );
    // The median run by rate of each, for the rows below.
    const middle = (runs: Measured[]) => [...runs].sort((a, b) => a.r.rps - b.r.rps)[Math.floor(runs.length / 2)]!;
    const bare = { r: middle(bareRuns).r, cpu: { service: middle(bareRuns).server } };
    const aloneRun = middle(meRuns.project);
    const alone = {
      r: aloneRun.r,
      cpu: {
        service: aloneRun.server,
        database: aloneRun.database,
        total: aloneRun.server === undefined ? undefined : aloneRun.server + (aloneRun.database ?? 0),
      },
    };
    const references = [
      contextRow(`bare node:http JSON, no database (context), ${generator}`, bareRuns),
      referenceRow('GET /auth/me, 10 connections', meRuns),
      referenceRow('GET /auth/me, 10 connections, the service at LOG_LEVEL=info (the default; the row above: warn)', meAtInfo),
    ];
    const µs = (n: number | undefined) => (n === undefined ? 'n/a' : `${n.toFixed(0)} µs`);
    rows.push({
      run: `bare node:http JSON (ceiling), ${generator}`,
      'req/s': Math.round(bare!.r.rps),
      'p50 ms': bare!.r.p50,
      'p99 ms': bare!.r.p99,
      ratio: `${µs(bare!.cpu.service)} CPU per request`,
      target: '',
      met: '',
    });
    rows.push({
      run: '/auth/me alone, 10 connections (median run)',
      'req/s': Math.round(alone!.r.rps),
      'p50 ms': alone!.r.p50,
      'p99 ms': alone!.r.p99,
      ratio: `${pct(ratio(alone!.r.rps, bare!.r.rps))} of bare node:http`,
      target: '',
      met: '',
    });
    const cpuRatio = ratio(alone!.cpu.total ?? 0, bare!.cpu.service ?? 0);
    rows.push({
      run: '  CPU per /auth/me: service + PostgreSQL',
      'req/s': '',
      'p50 ms': '',
      'p99 ms': '',
      ratio: `${µs(alone!.cpu.service)} + ${µs(alone!.cpu.database)} = ${cpuRatio.toFixed(1)}x bare`,
      target: '',
      met: '',
    });

    // 3b. POST /auth/refresh, 10 sessions chained at once, beside /auth/me alone
    // (both one signed token; a refresh adds a transaction with a row lock and an update).
    const sessions: string[] = [];
    for (let i = 0; i < 10; i++) {
      const { refreshToken } = await post(`${service.url}/auth/login`, { email: emails[0], password: PASSWORD });
      if (!refreshToken) throw new Error('login gave no refresh token');
      sessions.push(refreshToken);
    }
    const cpuBefore = cpuSeconds([service.pid]);
    const refreshes = await refreshChains(`${service.url}/auth/refresh`, sessions, 5);
    const cpuAfter = cpuSeconds([service.pid]);
    const requests = Object.values(refreshes.statuses).reduce((a, b) => a + b, 0);
    const cpuPerRefresh =
      cpuBefore === undefined || cpuAfter === undefined ? 'n/a' : `${(((cpuAfter - cpuBefore) * 1000) / requests).toFixed(2)} ms CPU each`;
    rows.push({
      run: '/auth/refresh, 10 sessions chained, 5 s',
      'req/s': Math.round(refreshes.rps),
      'p50 ms': round1(refreshes.p50),
      'p99 ms': round1(refreshes.p99),
      ratio: `${pct(ratio(refreshes.rps, alone!.r.rps))} of /auth/me alone; ${cpuPerRefresh} (service process)`,
      target: '',
      met: Object.keys(refreshes.statuses).every((s) => s === '200') ? '' : `NO: ${JSON.stringify(refreshes.statuses)}`,
    });

    // 4. /auth/me during a login storm that starts first and outlasts it.
    const stormMeanwhile = loginStorm(loginUrl, credentials, 2 * cores, 8);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const during = await load({ ...me, durationSeconds: 5 });
    const stormDuring = await stormMeanwhile;
    const p99Ratio = ratio(during.p99, alone!.r.p99);
    rows.push({
      run: '/auth/me during a login storm',
      'req/s': Math.round(during.rps),
      'p50 ms': during.p50,
      'p99 ms': during.p99,
      ratio: `p99 x${p99Ratio.toFixed(2)} of alone (${alone!.r.p99.toFixed(2)} ms)`,
      target: '',
      // Reported without a target; anything but 200 means the figure is not of the path meant.
      met: only200(during) ? '' : `NO: ${JSON.stringify(during.statusCounts)}, ${during.errors} errors`,
    });
    rows.push({
      run: '  logins meanwhile',
      'req/s': round1(stormDuring.rps),
      'p50 ms': Math.round(stormDuring.p50),
      'p99 ms': Math.round(stormDuring.p99),
      ratio: `${pct(ratio(stormDuring.rps, bcryptCeiling))} of bcrypt ceiling`,
      target: '',
      met: '',
    });

    // 5. Unknown email vs wrong password, one at a time, interleaved.
    const unknown: number[] = [];
    const wrong: number[] = [];
    await timedFailedLogin(service.url, 'warm-up@example.com');
    for (let i = 0; i < 30; i++) {
      unknown.push(await timedFailedLogin(service.url, `nobody-${i}-${randomBytes(3).toString('hex')}@example.com`));
      wrong.push(await timedFailedLogin(service.url, emails[i % emails.length]!));
    }
    const timingRatio = ratio(median(unknown), median(wrong));
    rows.push({
      run: 'login 401, unknown email (median of 30)',
      'req/s': '',
      'p50 ms': round1(median(unknown)),
      'p99 ms': '',
      ratio: '',
      target: '',
      met: '',
    });
    rows.push({
      run: 'login 401, wrong password (median of 30)',
      'req/s': '',
      'p50 ms': round1(median(wrong)),
      'p99 ms': '',
      ratio: `unknown/wrong ${timingRatio.toFixed(3)}`,
      target: 'within 10%',
      met: verdict(Math.abs(timingRatio - 1) <= 0.1),
    });
    rows.push({
      run: `machine load average (1 min) at start / end`,
      'req/s': '',
      'p50 ms': '',
      'p99 ms': '',
      ratio: `${loadAtStart.toFixed(2)} / ${loadavg()[0]!.toFixed(2)} on ${cores} cores`,
      target: 'quiet ~ < 1',
      met: '',
    });
    return { figures: rows, 'GET /auth/me against a node:http reference (medians)': references };
  } finally {
    await reference?.stop();
    await ceiling.stop();
    await service.stop();
    await serviceAtInfo.stop();
  }
}
