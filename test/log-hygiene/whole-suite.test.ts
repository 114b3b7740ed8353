// Log hygiene over the whole suite (`npm run test:log-hygiene`): `npm test` runs with TEST_LOG_LEVEL=debug, so
// every service a test starts (in-process or as a process) logs at debug, and every line a test
// keeps for its own assertions is printed too (test/helpers/logs.ts). Everything that run
// printed is then searched for credentials: each password the suite's sources send, the test
// API keys and JWT secret, and anything shaped like a bcrypt hash, a JWT, an API key or a
// private key (each test file generates its own idp signing key, found by that shape). The
// suite must also pass at debug level: logging more may not change behaviour.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isCommonPassword } from '../../src/kit/common-passwords.js';
import { TEST_SECRET } from '../helpers/accounts.js';
import { adminUrl } from '../helpers/database.js';
import { TEST_PUBLISHABLE_KEY, TEST_SECRET_KEY } from '../helpers/idp.js';
import { reportFigures } from '../resilience/helpers/figures.js';
import { findLeaks, type Secret } from '../resilience/fuzz/secrets.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SUITE_DEADLINE_MS = 20 * 60_000;

/**
 * Every password literal the suite sends (`password: '…'`, `PASSWORD = '…'`), read from its sources.
 * Left out: those on the common-password list ("password", "12345678"), which the suite sends only
 * to see them refused, and which are also plain words of the services' own messages.
 */
function suitePasswords(): Secret[] {
  const dirs = [path.join(root, 'test'), path.join(root, 'test/helpers')];
  const found = new Map<string, string>();
  for (const dir of dirs) {
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const source = readFileSync(path.join(dir, file), 'utf8');
      for (const match of source.matchAll(/(?:password|PASSWORD)\s*[:=]\s*'([^'\\]{6,})'/g)) {
        if (!found.has(match[1]!) && !isCommonPassword(match[1]!)) found.set(match[1]!, `a password sent by ${file}`);
      }
    }
  }
  return [...found].map(([value, label]) => ({ label, value }));
}

function withoutTestContext(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { NODE_TEST_CONTEXT: _, ...rest } = env;
  return rest;
}

/**
 * Runs `npm test`'s runner as a child on the same PostgreSQL; resolves with all it printed: its
 * terminal summary and the TAP report of every test (where the tests' and services' output is).
 */
function runWholeSuite(): Promise<{ code: number | null; output: string }> {
  const tapFile = path.join(root, 'test-artifacts', 'log-hygiene-inner.tap');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/run.ts'], {
      cwd: root,
      // At npm test's own concurrency: this file is its suite's only one. Without
      // NODE_TEST_CONTEXT, which would make the inner test runner report to this one.
      env: {
        ...withoutTestContext(process.env),
        DATABASE_URL: adminUrl(),
        TEST_LOG_LEVEL: 'debug',
        TEST_TAP_FILE: tapFile,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => chunks.push(d));
    child.stderr.on('data', (d: Buffer) => chunks.push(d));
    const timer = setTimeout(() => {
      process.kill(-child.pid!, 'SIGKILL');
      reject(new Error(`the suite did not finish in ${SUITE_DEADLINE_MS / 60_000} min`));
    }, SUITE_DEADLINE_MS);
    child.on('exit', (code) => {
      clearTimeout(timer);
      let tap = '';
      try {
        tap = readFileSync(tapFile, 'utf8');
      } catch {
        // No report: the runner died first; its own output says why.
      }
      resolve({ code, output: `${Buffer.concat(chunks).toString('utf8')}\n${tap}` });
    });
  });
}

test('the whole suite at debug level passes, and nothing it printed holds a credential', async (t) => {
  const { code, output } = await runWholeSuite();
  const summary = output.split('\n').filter((l) => /^# (tests|pass|fail) /.test(l));
  // The failing tests by name first: the output's tail rarely holds them.
  const failing = output.split('\n').filter((line) => /^\s*not ok /.test(line));
  assert.equal(code, 0, `the suite failed at debug level:\n${summary.join('\n')}\n${failing.join('\n')}\n${output.slice(-4000)}`);

  // What was searched: the JSON log lines the services wrote (test files' output is `# …`).
  // Tests leave most services silent; only the audit's level makes them log every request.
  const logLines = output.split('\n').filter((l) => l.startsWith('# {') && l.includes('"level":'));
  const requestLines = logLines.filter((l) => l.includes('"msg":"request completed"'));
  assert.ok(requestLines.length > 1_000, `only ${requestLines.length} request log lines: the level did not reach the services`);
  const routes = { shortener: '"url":"/api/links', accounts: '"url":"/admin/users', idp: '"url":"/rest/v1/', notes: '"url":"/notes' };
  const requestsOf = Object.fromEntries(
    Object.entries(routes).map(([name, url]) => [name, requestLines.filter((l) => l.includes(url)).length]),
  );
  for (const [name, count] of Object.entries(requestsOf)) assert.ok(count > 0, `no request of ${name} was logged`);

  const secrets: Secret[] = [
    { label: 'the accounts JWT_SECRET', value: TEST_SECRET },
    { label: 'IDP_PUBLISHABLE_KEY', value: TEST_PUBLISHABLE_KEY },
    { label: 'IDP_SECRET_KEY', value: TEST_SECRET_KEY },
    ...suitePasswords(),
  ];
  assert.ok(secrets.length > 20, `only ${secrets.length} secrets found to search for`);
  // The scanner finds a planted password (a search that cannot fail proves nothing).
  // (Searched for that one secret alone: a password may contain another, as wrong-password-here holds wrong-password.)
  assert.equal(findLeaks(`# {"level":30,"msg":"x ${secrets.at(-1)!.value}"}`, [secrets.at(-1)!]).length, 1);
  // A publishable key is a leak anywhere but on npm start's banner, which shows it by design.
  assert.equal(findLeaks('# {"level":30,"msg":"apikey sb_publishable_abcdefgh"}', []).length, 1);
  assert.equal(findLeaks('# idp publishable key (public by design): sb_publishable_abcdefgh', []).length, 0);

  // Everything test files and their services printed reaches the runner's output as `# …`
  // lines; TAP's own lines (results, and subtest names, which may quote a test's input) do not.
  const printed = output
    .split('\n')
    .filter((l) => l.startsWith('# ') && !l.startsWith('# Subtest: '))
    .join('\n');
  const problems = findLeaks(printed, secrets);
  reportFigures(t, 'log hygiene over the whole suite at debug level', {
    linesScanned: printed.split('\n').length,
    jsonLogLines: logLines.length,
    requestLines: requestsOf,
    secretsSearched: secrets.length,
    leaks: problems.length,
  });
  assert.deepEqual(problems, []);
});
