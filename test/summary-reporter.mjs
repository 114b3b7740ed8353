// The reporter of the project's test runs: one line per test file (passed, failed, skipped, to do,
// how long its tests ran), every failure in full with its file and test path (a file that could not
// even load, with what it printed), every skip and to-do with its reason, and the totals, the last
// line alone as "N passed, N failed, N skipped". Passes and failures count tests, not the suites
// (describe blocks) that hold them; a skip counts what was skipped, a test or a whole suite, once,
// so the skip list and the skip count always agree. Plain JavaScript: node loads reporters before
// any loader (tsx) is in place.
import { relative, resolve } from 'node:path';
import { inspect } from 'node:util';

const where = (file) => (file ? relative(process.cwd(), file) : '(no file)');

function fileEntry(files, file) {
  let entry = files.get(file);
  if (!entry) {
    entry = { passed: 0, failed: 0, skipped: 0, todo: 0, ms: 0 };
    files.set(file, entry);
  }
  return entry;
}

const indent = (text) =>
  text
    .split('\n')
    .map((line) => `      ${line}`)
    .join('\n');

function formatError(error) {
  if (!error) return '';
  // node wraps what a test threw in an ERR_TEST_FAILURE whose cause is the original error.
  const cause = error.code === 'ERR_TEST_FAILURE' && error.cause ? error.cause : error;
  const text = cause instanceof Error ? (cause.stack ?? String(cause)) : inspect(cause, { depth: 6 });
  return indent(text);
}

/** @param {AsyncIterable<{ type: string; data: any }>} source */
export default async function* summaryReporter(source) {
  const files = new Map();
  const failures = [];
  const skips = [];
  const todos = [];
  /** What each file wrote to stderr (its last part): a file that fails before any test explains itself there. */
  const stderrOf = new Map();
  const stack = new Map(); // file -> names of the suites open at each nesting level
  const outside = []; // diagnostics and output that no test owns (a file that failed to load)
  const started = Date.now();
  // node reports one test file's events together. A test defined in a helper module names that
  // module as its file: it is counted under the test file whose events it arrived among.
  let testFile;
  const fileOf = (file) => {
    if (file?.endsWith('.test.ts')) testFile = file;
    return testFile ?? file;
  };

  for await (const { type, data } of source) {
    if (type === 'test:start' && data.file) {
      const file = fileOf(data.file);
      const names = stack.get(file) ?? [];
      names.length = data.nesting;
      names.push(data.name);
      stack.set(file, names);
      fileEntry(files, file);
      continue;
    }
    if (type === 'test:stderr' || type === 'test:stdout') {
      if (!data.file) outside.push(data.message);
      else if (type === 'test:stderr') {
        // Node 20 names the file absolutely here, Node 22 relatively: keyed by the absolute path.
        const file = resolve(data.file);
        stderrOf.set(file, ((stderrOf.get(file) ?? '') + data.message).slice(-8000));
      }
      continue;
    }
    if (type !== 'test:pass' && type !== 'test:fail') continue;
    const isSuite = data.details?.type === 'suite';
    const file = fileOf(data.file);
    const entry = fileEntry(files, file);
    // A file's tests run one after another: its top-level durations add up to its time.
    if (data.nesting === 0) entry.ms += data.details?.duration_ms ?? 0;
    const path = [...(stack.get(file) ?? []).slice(0, data.nesting), data.name].join(' › ');
    if (data.skip !== undefined && data.skip !== false) {
      entry.skipped++;
      skips.push(`${where(file)}: ${path}: ${typeof data.skip === 'string' ? data.skip : 'NO REASON GIVEN'}`);
      continue;
    }
    if (type === 'test:fail') {
      const error = data.details?.error;
      // A suite fails when a test in it failed (already reported) or its own hook threw (reported here).
      const ownFailure = !isSuite || (error && error.failureType !== 'subtestsFailed');
      if (ownFailure) {
        entry.failed++;
        // The file itself failed (it did not load, or exited): what it printed says why.
        // (Node 20 names that failure by the absolute path, Node 22 by the path as given.)
        const fileFailed = data.nesting === 0 && data.file && resolve(data.name) === resolve(data.file);
        const printed = fileFailed ? stderrOf.get(resolve(data.file)) : undefined;
        const said = printed ? `\n      what the file printed:\n${indent(printed.trimEnd())}` : '';
        failures.push(`  ✗ ${where(file)}: ${path}\n${formatError(error)}${said}`);
      }
      continue;
    }
    if (data.todo !== undefined && data.todo !== false) {
      entry.todo++;
      todos.push(`${where(file)}: ${path}: ${typeof data.todo === 'string' ? data.todo : 'NO REASON GIVEN'}`);
      continue;
    }
    if (!isSuite) entry.passed++;
  }

  const rows = [...files.entries()].sort(([a], [b]) => (a ?? '').localeCompare(b ?? ''));
  let out = '\n';
  for (const [file, e] of rows) {
    const mark = e.failed > 0 ? '✗' : '✓';
    const seconds = (e.ms / 1000).toFixed(1).padStart(6);
    const skipped = e.skipped > 0 ? `, ${e.skipped} skipped` : '';
    const failed = e.failed > 0 ? `, ${e.failed} FAILED` : '';
    const todo = e.todo > 0 ? `, ${e.todo} to do` : '';
    out += `${mark} ${seconds}s  ${where(file)}: ${e.passed} passed${failed}${skipped}${todo}\n`;
  }
  if (outside.length > 0) out += `\noutput outside any test:\n${outside.join('')}\n`;
  if (skips.length > 0) out += `\nskipped, and why:\n${skips.map((s) => `  - ${s}\n`).join('')}`;
  if (todos.length > 0) out += `\nto do:\n${todos.map((s) => `  - ${s}\n`).join('')}`;
  if (failures.length > 0) out += `\nfailures:\n${failures.join('\n\n')}\n`;
  const total = (key) => rows.reduce((n, [, e]) => n + e[key], 0);
  const todo = total('todo') > 0 ? `, ${total('todo')} to do` : '';
  out += `\n${rows.length} files in ${((Date.now() - started) / 1000).toFixed(0)} s${todo}\n`;
  // Alone on the last line, in the form CI reads a run's result from.
  out += `${total('passed')} passed, ${total('failed')} failed, ${total('skipped')} skipped\n`;
  yield out;
}
