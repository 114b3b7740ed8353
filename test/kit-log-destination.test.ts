import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// A process's log lines go to standard output asynchronously (src/kit/http/logging.ts): lines
// written while a write is under way wait in memory. These run a real process and read its real
// standard output, to check that what was buffered when the process ended is still written.

const root = fileURLToPath(new URL('..', import.meta.url));

async function run(body: string): Promise<{ code: number | null; lines: Array<Record<string, unknown>> }> {
  const script = `import { pino } from 'pino';
import { logDestination } from './src/kit/http/logging.ts';
const log = pino({ base: null }, logDestination());
${body}`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.resume();
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return {
    code,
    lines: out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
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

  it('the lines before an uncaught exception are written too', async () => {
    const { code, lines } = await run(
      `for (let i = 0; i < 2000; i++) log.info({ i }, 'line'); setImmediate(() => { throw new Error('boom'); });`,
    );
    assert.notEqual(code, 0);
    assert.equal(lines.length, 2000);
    assert.equal(lines.at(-1)?.i, 1999);
  });
});
