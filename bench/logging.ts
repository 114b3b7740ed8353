import { spawn } from 'node:child_process';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { fileURLToPath } from 'node:url';
import { buildHttpApp } from '../src/kit/http/app.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import { accessLog, LOG_FLUSH_INTERVAL_MS } from '../src/kit/http/logging.js';
import { median } from './lib.js';

// What one access line costs a service: the CPU time per request of the same app, in the same
// process, at LOG_LEVEL=info (one access line a request) and at warn (none), the difference being
// the line. The line goes where a service's go: the asynchronous destination on standard output, a
// pipe read by this bench, its write system calls included (the process's CPU time counts every
// thread). Requests go through inject, not a socket: the access line is written the same way, and
// the rest of the request is the same on both sides, so the difference is read without the noise of
// a load generator sharing the two cores. Short batches alternate between the two levels, medians,
// since this machine's speed drifts from second to second.
//
// And the line alone: the access line's own code (AccessLog.requestCompleted) called for a request
// and reply of the same fields, one line a turn of the event loop, through the same destination.

const CHILD_FLAG = '--logging-child';
const REQUESTS_PER_BATCH = 2_000;
const BATCHES = 15;
const LINES = 50_000;

interface Figures {
  warn: number;
  info: number;
  line: number;
}

async function child(): Promise<void> {
  const apps = {} as Record<'warn' | 'info', Awaited<ReturnType<typeof buildHttpApp>>>;
  for (const level of ['warn', 'info'] as const) {
    const app = await buildHttpApp({ title: 'logging bench', logLevel: level, errorBody: statusEnvelope, readiness: async () => {} });
    app.get('/abcdefg', async (_request, reply) => reply.code(302).header('location', 'https://example.com/landing').send());
    await app.ready();
    apps[level] = app;
  }
  const batch = async (level: 'warn' | 'info'): Promise<number> => {
    const start = process.cpuUsage();
    for (let i = 0; i < REQUESTS_PER_BATCH; i++) {
      const answer = await apps[level].inject({ method: 'GET', url: '/abcdefg?utm_source=bench', remoteAddress: '198.51.100.7' });
      if (answer.statusCode !== 302) throw new Error(`answered ${answer.statusCode}`);
    }
    const used = process.cpuUsage(start);
    return (used.user + used.system) / REQUESTS_PER_BATCH;
  };
  await batch('warn');
  await batch('info');
  const runs = { warn: [] as number[], info: [] as number[] };
  for (let round = 0; round < BATCHES; round++) {
    const order = round % 2 === 0 ? (['warn', 'info'] as const) : (['info', 'warn'] as const);
    for (const level of order) runs[level].push(await batch(level));
  }

  // The line alone, through the app's own access log (what buildHttpApp gives Fastify).
  const log = accessLog(undefined, true);
  const request = {
    id: 'req-1a2b3c',
    method: 'GET',
    url: '/abcdefg?utm_source=bench',
    host: 'sho.rt',
    ip: '198.51.100.7',
    socket: { remotePort: 51234 },
    log: apps.info.log,
  } as unknown as FastifyRequest;
  const reply = { statusCode: 302, elapsedTime: 0.42 } as unknown as FastifyReply;
  // One line a turn of the event loop, as lines come from requests, less the same loop without them.
  const turns = async (write: boolean) => {
    const start = process.cpuUsage();
    for (let i = 0; i < LINES; i++) {
      if (write) log.requestCompleted(null, request, reply);
      await new Promise((resolve) => setImmediate(resolve));
    }
    // The writes still under way (and the last batch, within the flush interval) are counted.
    await new Promise((resolve) => setTimeout(resolve, 2 * LOG_FLUSH_INTERVAL_MS));
    const used = process.cpuUsage(start);
    return (used.user + used.system) / LINES;
  };
  const lines = async () => (await turns(true)) - (await turns(false));
  await lines();
  const line = median([await lines(), await lines(), await lines()]);
  process.send!({ warn: median(runs.warn), info: median(runs.info), line } satisfies Figures);
  for (const app of Object.values(apps)) await app.close();
}

export async function run(): Promise<Array<Record<string, string | number>>> {
  const proc = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), CHILD_FLAG], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  // The log lines are read and dropped, as a log shipper reading standard output would take them.
  proc.stdout!.resume();
  const figures = await new Promise<Figures>((resolve, reject) => {
    proc.once('message', (m) => resolve(m as Figures));
    proc.once('exit', (code) => reject(new Error(`the logging bench's process exited with ${code}`)));
  });
  proc.kill();
  const difference = figures.info - figures.warn;
  return [
    { run: 'a 302 at LOG_LEVEL=warn (no line), inject, CPU µs per request', 'CPU µs': figures.warn.toFixed(1), target: '', met: '' },
    { run: 'the same at LOG_LEVEL=info (one access line)', 'CPU µs': figures.info.toFixed(1), target: '', met: '' },
    { run: '  the difference', 'CPU µs': difference.toFixed(1), target: '', met: '' },
    {
      run: 'an access line alone, written to standard output (a pipe)',
      'CPU µs': figures.line.toFixed(1),
      target: '<= 10 µs',
      met: figures.line <= 10 ? 'yes' : 'NO',
    },
  ];
}

if (process.argv.includes(CHILD_FLAG)) await child();
