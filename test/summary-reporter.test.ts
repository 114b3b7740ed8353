// The readable summary of a test run (test/summary-reporter.mjs), on files made for it: a line per
// file with its passes, failures, skips and to-dos, every failure in full (a file that cannot load
// with what it printed), a skip list as long as the skip count, and the totals alone on the last line.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const reporter = fileURLToPath(new URL('./summary-reporter.mjs', import.meta.url));
const dir = mkdtempSync(path.join(tmpdir(), 'summary-reporter-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const MIXED = `
import assert from 'node:assert';
import { describe, it, test } from 'node:test';
describe('a suite skipped whole', { skip: 'no browser here' }, () => {
  it('one', () => {});
  it('two', () => {});
});
describe('suite', () => {
  it('skipped with a reason', { skip: 'not on this machine' }, () => {});
  it.skip('skipped without one', () => {});
  it('skipped as it runs', (t) => t.skip('decided while running'));
  it('to do', { todo: 'the other half' }, () => {});
  it('passes', () => {});
  it('fails', () => assert.equal(1, 2));
});
test('with subtests', async (t) => {
  await t.test('passes too', () => {});
});
`;

test('a line per file, failures in full, the skip list as long as the skip count, the totals last', async () => {
  writeFileSync(path.join(dir, 'mixed.test.mjs'), MIXED);
  writeFileSync(path.join(dir, 'broken.test.mjs'), "throw new Error('this file cannot load');\n");
  const run = await promisify(execFile)(
    process.execPath,
    ['--test', `--test-reporter=${reporter}`, '--test-reporter-destination=stdout', 'mixed.test.mjs', 'broken.test.mjs'],
    // Without the variable node sets for its test processes: this run is a run of its own, not a part of this one.
    { cwd: dir, env: Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'NODE_TEST_CONTEXT')) },
  ).catch((err: { stdout: string }) => err);
  const out = run.stdout;
  assert.match(out, /^✗ +[\d.]+s {2}broken\.test\.mjs: 0 passed, 1 FAILED$/m);
  assert.match(out, /^✗ +[\d.]+s {2}mixed\.test\.mjs: 3 passed, 1 FAILED, 4 skipped, 1 to do$/m);
  const skipList = out.split('skipped, and why:\n')[1]?.split('\n\n')[0]?.split('\n') ?? [];
  assert.equal(skipList.length, 4, out);
  assert.ok(skipList.includes('  - mixed.test.mjs: a suite skipped whole: no browser here'), out);
  assert.ok(skipList.includes('  - mixed.test.mjs: suite › skipped without one: NO REASON GIVEN'), out);
  assert.match(out, /to do:\n {2}- mixed\.test\.mjs: suite › to do: the other half\n/);
  assert.match(out, /✗ mixed\.test\.mjs: suite › fails\n {6}AssertionError \[ERR_ASSERTION\]: 1 == 2/);
  assert.match(out, /✗ broken\.test\.mjs: .*broken\.test\.mjs\n[\s\S]*what the file printed:\n[\s\S]*Error: this file cannot load/);
  const lines = out.trimEnd().split('\n');
  assert.match(lines.at(-2)!, /^2 files in \d+ s, 1 to do$/);
  assert.equal(lines.at(-1), '3 passed, 2 failed, 4 skipped');
});
