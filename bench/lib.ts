import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../src/kit/embedded-postgres.js';
import { startServiceProcess } from '../test/helpers/process.js';

export { freePort } from '../test/helpers/process.js';

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

/** Runs a service entry (e.g. src/shortener/server.ts) as its own process on a free port. */
export async function startService(entry: string, env: Record<string, string>): Promise<{ url: string; stop(): Promise<void> }> {
  const service = await startServiceProcess(entry, env, { keepOutput: 4000 });
  return { url: service.url, stop: async () => void (await service.stop()) };
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

export async function startCeiling(kind: 'redirect' | 'json'): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['-e', CEILING, kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port: string = await new Promise((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
  return { url: `http://127.0.0.1:${port}`, stop: stopper(child) };
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
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  statusCounts: Record<string, number>;
  statusCountsWithWarmup: Record<string, number>;
  errors: number;
}

/** autocannon in a separate process. */
export async function load(opts: LoadOptions): Promise<LoadResult> {
  const child = spawn(process.execPath, [path.join(here, 'load-worker.mjs'), JSON.stringify(opts)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code: number | null = await new Promise((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`load generator failed with ${code}`);
  return JSON.parse(out) as LoadResult;
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
