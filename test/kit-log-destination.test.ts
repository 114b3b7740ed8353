import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LOG_BUFFER_LIMIT_BYTES } from '../src/kit/http/logging.js';

// A process's log lines go to standard output asynchronously (src/kit/http/logging.ts): lines
// written while a write is under way wait in memory. These run a real process and read its real
// standard output, to check that what was buffered when the process ended is still written.

const root = fileURLToPath(new URL('..', import.meta.url));

async function run(
  body: string,
  opts: { readAfterStderr?: boolean } = {},
): Promise<{ code: number | null; lines: Array<Record<string, unknown>>; stderr: string }> {
  const script = `import { pino } from 'pino';
import { logDestination } from './src/kit/http/logging.ts';
const log = pino({ base: null }, logDestination());
${body}`;
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let stderr = '';
  child.stdout.setEncoding('utf8');
  const read = () => child.stdout.on('data', (d: string) => (out += d));
  // A reader that stops: with readAfterStderr, standard output is read only once the child has
  // written to stderr.
  if (!opts.readAfterStderr) read();
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
    if (child.stdout.listenerCount('data') === 0) read();
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const lines = out
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { code, lines, stderr };
}

describe('the log destination of a process', () => {
  it('every line written before process.exit reaches standard output, in order', async () => {
    const { code, lines } = await run(`for (let i = 0; i < 5000; i++) log.info({ i }, 'line'); process.exit(3);`);
    assert.equal(code, 3);
    assert.equal(lines.length, 5000);
    assert.deepEqual(
      lines.map((l) => l.i),
      Array.from({ length: 5000 }, (_, i) => i),
    );
  });

  it('a reader that stops reading holds at most LOG_BUFFER_LIMIT_BYTES in memory: later lines are dropped, the process goes on', async () => {
    // 64 MiB of lines (about 1 KiB each) written while nothing reads standard output.
    const { code, lines, stderr } = await run(
      `const pad = 'x'.repeat(1000);
const heap = () => { globalThis.gc(); return process.memoryUsage().heapUsed; };
const before = heap();
for (let i = 0; i < 65536; i++) log.info({ i, pad }, 'line');
process.stderr.write(String(heap() - before));
// Exits once what was kept is written: an exit while a write is still blocked on the pipe could
// put that write's lines after the ones pino flushes at exit, which is not what is measured here.
logDestination().flush(() => process.exit(0));`,
      { readAfterStderr: true },
    );
    assert.equal(code, 0);
    const grewBy = Number(stderr);
    // What waits in memory is about the limit (64 MiB were written).
    assert.ok(grewBy < 2 * LOG_BUFFER_LIMIT_BYTES, `the heap grew by ${grewBy} bytes`);
    // What was kept is whole lines, in order, far fewer than were written.
    assert.ok(lines.length > 1000 && lines.length < 40_000, `${lines.length} lines`);
    const kept = lines.map((l) => l.i as number);
    assert.deepEqual(
      kept,
      [...kept].sort((a, b) => a - b),
    );
  });

  it('the lines before an uncaught exception are written too', async () => {
    const { code, lines } = await run(
      `for (let i = 0; i < 2000; i++) log.info({ i }, 'line'); setImmediate(() => { throw new Error('boom'); });`,
    );
    assert.notEqual(code, 0);
    assert.equal(lines.length, 2000);
    assert.equal(lines.at(-1)?.i, 1999);
  });
});
