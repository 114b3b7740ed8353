import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../src/dev/embedded-postgres.js';
import pg from 'pg';
import { ensureDatabase, withDatabase } from '../src/kit/db.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** One PostgreSQL for the whole bench run: DATABASE_URL, else embedded in a temporary directory. */
export async function startBenchDatabase(): Promise<{ adminUrl: string; stop(): Promise<void> }> {
  if (process.env.DATABASE_URL) return { adminUrl: process.env.DATABASE_URL, stop: async () => {} };
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-bench-'));
  chmodSync(dir, 0o755);
  const pg = await startEmbeddedPostgres(dir, { info: () => {}, warn: (m) => console.error(m), debug: () => {} });
  return {
    adminUrl: pg.adminUrl,
    stop: async () => {
      await pg.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
}

/** A TCP port that was free a moment ago (the kernel's pick). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

// The benches keep their own process runner rather than the tests' one: they need only start,
// readiness and stop, and must not depend on test code (nor on the test log audit it obeys).
const root = path.resolve(here, '..');
const STARTUP_LIMIT_MS = 60_000;

/** Runs a service entry (e.g. src/shortener/server.ts) as its own process on a free port, once /healthz answers. */
/** An empty database `name` on the bench's server (dropped first if a run left one); returns its URL. */
export async function freshBenchDatabase(adminUrl: string, name: string): Promise<string> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
  await ensureDatabase(adminUrl, name);
  return withDatabase(adminUrl, name);
}

export async function startService(
  entry: string,
  env: Record<string, string>,
): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const port = await freePort();
  // BENCH_CPU_PROF=<dir>: each service process writes a V8 CPU profile there when it stops (open it
  // in Chrome DevTools or any .cpuprofile viewer), to see where its time goes under the bench's load.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', path.join(root, entry)], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // The last few kB of output, for the error when the service does not come up.
  let tail = '';
  const keep = (d: Buffer) => void (tail = (tail + d.toString()).slice(-4000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const url = `http://127.0.0.1:${port}`;
  const stop = stopper(child);
  const deadline = Date.now() + STARTUP_LIMIT_MS;
  while (
    !(await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (child.exitCode !== null) throw new Error(`${entry} exited with ${child.exitCode}: ${tail}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${entry} did not answer /healthz within ${STARTUP_LIMIT_MS} ms: ${tail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, pid: child.pid!, stop };
}

/** The PostgreSQL backends serving `database` now (the asking connection excluded). */
export async function databaseBackendPids(adminUrl: string, database: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [database],
    );
    return rows.map((r) => r.pid);
  } finally {
    await client.end();
  }
}

/**
 * CPU seconds the processes used during fn: `services` (fixed pids) and `backends` (asked before
 * and after, so a PostgreSQL backend started meanwhile counts from 0). undefined off Linux.
 */
export async function cpuDuring<T>(
  fn: () => Promise<T>,
  services: number[],
  backends: () => Promise<number[]> = async () => [],
): Promise<{ result: T; serviceCpu?: number; databaseCpu?: number }> {
  const servicesBefore = cpuSeconds(services);
  const backendsBefore = new Map((await backends()).map((pid) => [pid, cpuSeconds([pid]) ?? 0]));
  const result = await fn();
  const servicesAfter = cpuSeconds(services);
  const backendsAfter = await backends();
  if (servicesBefore === undefined || servicesAfter === undefined) return { result };
  const databaseCpu = backendsAfter.reduce((sum, pid) => sum + (cpuSeconds([pid]) ?? 0) - (backendsBefore.get(pid) ?? 0), 0);
  return { result, serviceCpu: servicesAfter - servicesBefore, databaseCpu };
}

/** `12 + 30 µs` of CPU per request: service (+ PostgreSQL when measured). */
export function cpuPerRequest(
  m: { serviceCpu?: number; databaseCpu?: number },
  requests: number,
): { service?: number; database?: number; total?: number } {
  if (m.serviceCpu === undefined || requests === 0) return {};
  const service = (m.serviceCpu * 1e6) / requests;
  const database = m.databaseCpu === undefined ? undefined : (m.databaseCpu * 1e6) / requests;
  return { service, database, total: service + (database ?? 0) };
}

const TICKS_PER_SECOND = 100; // USER_HZ: 100 on every Linux architecture Node runs on (getconf CLK_TCK)

/**
 * CPU seconds (user + system) the processes have used so far, from
 * /proc/<pid>/stat (fields 14 and 15, in clock ticks). A process that is gone
 * counts 0. Linux only; elsewhere undefined.
 */
export function cpuSeconds(pids: number[]): number | undefined {
  if (!existsSync('/proc/self/stat')) return undefined;
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // The command name (field 2) is in parentheses and may contain spaces: count from after it.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // Exited: its time is no longer readable.
    }
  }
  return ticks / TICKS_PER_SECOND;
}

// The machine's ceiling: the same kind of answer from a bare node:http server, in its own process.
const CEILING = `
const http = require('node:http');
const kind = process.argv[1];
const body = JSON.stringify({ status: 200, response: 'OK', message: 'ok', data: { id: 1 } });
http.createServer((req, res) => {
  if (kind === 'redirect') { res.writeHead(302, { location: 'https://example.com/', 'cache-control': 'no-store' }); res.end(); }
  else { res.writeHead(200, { 'content-type': 'application/json' }); res.end(body); }
}).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`;

export async function startCeiling(kind: 'redirect' | 'json'): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['-e', CEILING, kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port: string = await new Promise((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop: stopper(child) };
}

export interface LoadOptions {
  url: string;
  connections?: number;
  durationSeconds?: number;
  warmupSeconds?: number;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Run a fixed number of requests (sized by the warm-up) so every answer is received and counted. */
  exactCount?: boolean;
  /** Paths taken in turn, one per request (e.g. many short codes). */
  paths?: string[];
  /** Header sets taken in turn, one per request, on top of `headers` (e.g. a mix of User-Agents). */
  headerSets?: Array<Record<string, string>>;
  /** autocannon unless told; wrk (defaultGenerator() when installed) is faster, so it takes less of the CPU it shares. */
  generator?: 'wrk' | 'autocannon';
}

export interface LoadResult {
  generator: 'wrk' | 'autocannon';
  /** Requests answered in the measured run. */
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  statusCounts: Record<string, number>;
  statusCountsWithWarmup: Record<string, number>;
  errors: number;
}

export const WRK = '/usr/bin/wrk';

/** The generator load() uses when not told: BENCH_GENERATOR if set, else wrk when installed. */
export function defaultGenerator(): 'wrk' | 'autocannon' {
  const chosen = process.env.BENCH_GENERATOR;
  if (chosen === 'wrk' || chosen === 'autocannon') return chosen;
  return existsSync(WRK) ? 'wrk' : 'autocannon';
}

async function runGenerator(command: string, args: string[], input?: string): Promise<string> {
  const child = spawn(command, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'inherit'] });
  if (input !== undefined) child.stdin!.end(input);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code: number | null = await new Promise((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`load generator ${command} failed with ${code}`);
  return out;
}

/** The load generator in a separate process: wrk (timed) or autocannon (timed, or a fixed count). */
export async function load(opts: LoadOptions): Promise<LoadResult> {
  const generator = opts.generator ?? 'autocannon';
  if (generator === 'wrk') return wrkLoad(opts);
  // Options on stdin: 10,000 paths and the header sets outgrow one command-line argument (E2BIG).
  const out = await runGenerator(process.execPath, [path.join(here, 'load-worker.mjs')], JSON.stringify(opts));
  return { generator, ...(JSON.parse(out) as Omit<LoadResult, 'generator'>) };
}

// wrk's Lua script: paths and header sets in turn (each thread from its own
// offset), statuses counted per thread and summed at the end, one JSON line out.
function wrkScript(opts: LoadOptions): string {
  const lua = (v: string) => JSON.stringify(v); // ASCII only here: a JSON string is a Lua string
  const table = (items: string[]) => `{${items.join(',')}}`;
  const paths = opts.paths ?? [new URL(opts.url).pathname];
  const headerSets = (opts.headerSets ?? [{}]).map((h) =>
    table(Object.entries({ ...opts.headers, ...h }).map(([k, v]) => `[${lua(k)}]=${lua(v)}`)),
  );
  return `
local paths = ${table(paths.map(lua))}
local header_sets = ${table(headerSets)}
local threads = {}
local next_id = 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end
local n = 0
counts = {}
function init(args)
  n = id * 7919
end
function request()
  n = n + 1
  return wrk.format(${lua(opts.method ?? 'GET')}, paths[(n % #paths) + 1], header_sets[(n % #header_sets) + 1], ${opts.body ? lua(opts.body) : 'nil'})
end
function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end
function done(summary, latency, requests)
  local all = {}
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("counts")) do all[status] = (all[status] or 0) + count end
  end
  local parts = {}
  for status, count in pairs(all) do table.insert(parts, string.format('"%d":%d', status, count)) end
  local e = summary.errors
  io.write(string.format('{"requests":%d,"seconds":%f,"p50":%f,"p99":%f,"errors":%d,"statusCounts":{%s}}\\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    e.connect + e.read + e.write + e.timeout, table.concat(parts, ",")))
end
`;
}

async function wrkLoad(opts: LoadOptions): Promise<LoadResult> {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-wrk-'));
  try {
    const script = path.join(dir, 'load.lua');
    writeFileSync(script, wrkScript(opts));
    const origin = new URL(opts.url).origin;
    const run = async (seconds: number) => {
      const out = await runGenerator(WRK, [
        '-t2',
        `-c${opts.connections ?? 50}`,
        `-d${seconds}s`,
        '--timeout',
        '10s',
        '-s',
        script,
        origin,
      ]);
      const line = out.split('\n').find((l) => l.startsWith('{"requests"'));
      if (!line) throw new Error(`wrk printed no result: ${out}`);
      return JSON.parse(line) as {
        requests: number;
        seconds: number;
        p50: number;
        p99: number;
        errors: number;
        statusCounts: Record<string, number>;
      };
    };
    const all: Record<string, number> = {};
    const add = (counts: Record<string, number>) => {
      for (const [k, v] of Object.entries(counts)) all[k] = (all[k] ?? 0) + v;
    };
    if ((opts.warmupSeconds ?? 0) > 0) add((await run(Math.max(1, Math.round(opts.warmupSeconds!)))).statusCounts);
    const r = await run(Math.max(1, Math.round(opts.durationSeconds ?? 10)));
    add(r.statusCounts);
    return {
      generator: 'wrk',
      requests: r.requests,
      rps: r.requests / r.seconds,
      p50: r.p50,
      p99: r.p99,
      statusCounts: r.statusCounts,
      statusCountsWithWarmup: all,
      errors: r.errors,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printTable(title: string, rows: Array<Record<string, string | number>>): void {
  console.log(`\n## ${title}\n`);
  if (rows.length === 0) return;
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const fmt = (v: string | number | undefined) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : (v ?? ''));
  console.log(`| ${cols.join(' | ')} |`);
  console.log(`| ${cols.map(() => '---').join(' | ')} |`);
  for (const r of rows) console.log(`| ${cols.map((c) => fmt(r[c])).join(' | ')} |`);
}

export const ratio = (a: number, b: number) => (b === 0 ? 0 : a / b);

// ---------------------------------------------------------------------------------------------
// Minimal references: each hot path beside a plain node:http server doing the same durable work.

export interface Server {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

const REFERENCE_CONFIG = 'BENCH_REFERENCE';

/** The config a reference process was started with (startReference's `config`, plus its port). */
export function referenceConfig<T>(): T & { port: number } {
  // Exit through process.exit on the bench's SIGTERM, so --cpu-prof (BENCH_CPU_PROF) writes its profile.
  process.once('SIGTERM', () => process.exit(0));
  return JSON.parse(process.env[REFERENCE_CONFIG]!) as T & { port: number };
}

/**
 * Runs the bench file `module` again as its own process with `flag`, which makes it serve its
 * reference on a free port (read with referenceConfig()); ready once it answers anything.
 */
export async function startReference(module: string, flag: string, config: object): Promise<Server> {
  const port = await freePort();
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', module, flag], {
    cwd: root,
    env: { ...process.env, [REFERENCE_CONFIG]: JSON.stringify({ ...config, port }) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + STARTUP_LIMIT_MS;
  while (
    !(await fetch(url).then(
      async (r) => {
        await r.arrayBuffer();
        return true;
      },
      () => false,
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the reference ${flag} did not start`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, pid: child.pid!, stop: stopper(child) };
}

/** One measured run: the load's figures and the CPU per request of the server, of other processes (an idp), of PostgreSQL. */
export interface Measured {
  r: LoadResult;
  /** µs of CPU per request; undefined off Linux. */
  server?: number;
  others?: number;
  database?: number;
}

/**
 * A warm-up run outside the CPU window, then the measured run with the CPU the server (and
 * `others`, and PostgreSQL's `backends`) used during it, per request answered.
 */
export async function measure(
  opts: LoadOptions,
  processes: { server: number; others?: number[]; backends?: () => Promise<number[]> },
  warmupSeconds = 2,
): Promise<Measured> {
  if (warmupSeconds > 0) await load({ ...opts, warmupSeconds: 0, durationSeconds: warmupSeconds });
  const othersBefore = cpuSeconds(processes.others ?? []);
  const m = await cpuDuring(() => load({ ...opts, warmupSeconds: 0 }), [processes.server], processes.backends);
  const othersAfter = cpuSeconds(processes.others ?? []);
  const perRequest = (seconds: number | undefined) =>
    seconds === undefined || m.result.requests === 0 ? undefined : (seconds * 1e6) / m.result.requests;
  return {
    r: m.result,
    server: perRequest(m.serviceCpu),
    others:
      processes.others === undefined || othersBefore === undefined || othersAfter === undefined
        ? undefined
        : perRequest(othersAfter - othersBefore),
    database: processes.backends ? perRequest(m.databaseCpu) : undefined,
  };
}

export const BENCH_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/**
 * `rounds` rounds of the reference and the project, alternating which goes first (reference,
 * project; project, reference; …) so a burst of outside load hits both alike.
 */
export async function alternate(
  runReference: () => Promise<Measured>,
  runProject: () => Promise<Measured>,
  rounds = BENCH_ROUNDS,
): Promise<{ reference: Measured[]; project: Measured[] }> {
  const reference: Measured[] = [];
  const project: Measured[] = [];
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      reference.push(await runReference());
      project.push(await runProject());
    } else {
      project.push(await runProject());
      reference.push(await runReference());
    }
  }
  return { reference, project };
}

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Answers of all the runs by status: `200×51234`. */
function statusTotals(runs: Measured[]): string {
  const all: Record<string, number> = {};
  for (const m of runs) for (const [status, n] of Object.entries(m.r.statusCounts)) all[status] = (all[status] ?? 0) + n;
  return Object.entries(all)
    .map(([status, n]) => `${status}×${n}`)
    .join(' ');
}

/** The medians of a path's runs. */
export function summarise(runs: Measured[]) {
  const cpu = (pick: (m: Measured) => number | undefined) =>
    runs.every((m) => pick(m) !== undefined) ? median(runs.map((m) => pick(m)!)) : undefined;
  return {
    rps: median(runs.map((m) => m.r.rps)),
    p50: median(runs.map((m) => m.r.p50)),
    p99: median(runs.map((m) => m.r.p99)),
    server: cpu((m) => m.server),
    others: cpu((m) => m.others),
    database: cpu((m) => m.database),
    total: cpu((m) => (m.server === undefined ? undefined : m.server + (m.others ?? 0) + (m.database ?? 0))),
    statuses: statusTotals(runs),
    errors: runs.reduce((sum, m) => sum + m.r.errors, 0),
  };
}

/** The targets of a project path against its reference: printed beside the figures, not asserted. */
export const REFERENCE_TARGETS = { throughput: 0.85, cpu: 1.2, p99: 1.5 };

/**
 * One row per path: the project's and the reference's medians side by side, with the three
 * ratios and whether the targets (≥ 0.85 of the rate, ≤ 1.2× the CPU, ≤ 1.5× the p99) were met.
 * `cpuLabel` names what the CPU column adds up (server + PostgreSQL, or more).
 */
export function referenceRow(path: string, runs: { reference: Measured[]; project: Measured[] }): Record<string, string | number> {
  const ref = summarise(runs.reference);
  const own = summarise(runs.project);
  const µs = (n: number | undefined) => (n === undefined ? 'n/a' : n.toFixed(0));
  const parts = (s: ReturnType<typeof summarise>) =>
    [s.server, ...(s.others === undefined ? [] : [s.others]), ...(s.database === undefined ? [] : [s.database])].map(µs).join(' + ');
  // Judged as printed (two decimals), so a printed 1.20 is within ≤ 1.2×.
  const two = (n: number) => Number(n.toFixed(2));
  const throughput = two(ratio(own.rps, ref.rps));
  const cpu = own.total === undefined || ref.total === undefined ? undefined : two(ratio(own.total, ref.total));
  const p99 = two(ratio(own.p99, ref.p99));
  const met =
    throughput >= REFERENCE_TARGETS.throughput && (cpu === undefined || cpu <= REFERENCE_TARGETS.cpu) && p99 <= REFERENCE_TARGETS.p99;
  return {
    path,
    'project req/s': Math.round(own.rps),
    'reference req/s': Math.round(ref.rps),
    'rate ratio': throughput,
    'project CPU µs/req': `${parts(own)} = ${µs(own.total)}`,
    'reference CPU µs/req': `${parts(ref)} = ${µs(ref.total)}`,
    'CPU ratio': cpu ?? 'n/a',
    'project p99 ms': own.p99,
    'reference p99 ms': ref.p99,
    'p99 ratio': p99,
    'targets ≥ 0.85, ≤ 1.2×, ≤ 1.5×': met ? 'met' : 'not met',
    'statuses (project / reference)': `${own.statuses} / ${ref.statuses}`,
    errors: own.errors + ref.errors,
  };
}

/** The bare node:http server's medians as a context row of a references table. */
export function contextRow(label: string, runs: Measured[]): Record<string, string | number> {
  const s = summarise(runs);
  // Every column of referenceRow, in its order, so the table's columns keep that order.
  const row: Record<string, string | number> = Object.fromEntries(
    Object.keys(referenceRow('', { reference: runs, project: runs })).map((k) => [k, '']),
  );
  return {
    ...row,
    path: label,
    'reference req/s': Math.round(s.rps),
    'reference CPU µs/req': s.server === undefined ? 'n/a' : s.server.toFixed(0),
    'reference p99 ms': s.p99,
  };
}
