// `npm test`: gives the suite one PostgreSQL server, then runs node's test
// runner over the test files. DATABASE_URL set: that server (its database is
// only used to create and drop per-file databases). Unset: an embedded
// PostgreSQL in a temporary directory, removed afterwards.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/dev/embedded-postgres.js';

const suite = process.argv[2] === '--suite' ? process.argv[3]! : 'unit';
const explicitFiles = process.argv.slice(process.argv[2] === '--suite' ? 4 : 2);
// unit: test/*.test.ts; resilience, browser, contract and log-hygiene: their own folders, run on demand only.
const testDir = path.resolve('test', ['resilience', 'browser', 'contract', 'log-hygiene'].includes(suite) ? suite : '.');

function testFiles(): string[] {
  if (explicitFiles.length > 0) return explicitFiles;
  return readdirSync(testDir)
    .filter((f) => f.endsWith('.test.ts'))
    .sort()
    .map((f) => path.join(testDir, f));
}

const quiet = { info: () => {}, warn: (m: string) => console.error(m), debug: () => {} };
let adminUrl = process.env.DATABASE_URL;
let cleanup = async () => {};
if (!adminUrl) {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-test-'));
  chmodSync(dir, 0o755);
  const embedded = await startEmbeddedPostgres(dir, quiet).catch((err: Error) => {
    rmSync(dir, { recursive: true, force: true });
    console.error(`npm test: ${err.message}`);
    process.exit(1);
  });
  adminUrl = embedded.adminUrl;
  cleanup = async () => {
    await embedded.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}

// Databases of this run share a prefix so they can be dropped together at the end.
const runId = `t${randomBytes(3).toString('hex')}`;
// On the terminal: one line per file, failures in full, skips with their reasons, totals
// (test/summary-reporter.mjs). Every test's own report, TAP, goes to test-artifacts/ for digging
// (or to TEST_TAP_FILE: the log-hygiene run of the whole suite reads its own there).
mkdirSync('test-artifacts', { recursive: true });
const tapFile = process.env.TEST_TAP_FILE ?? path.resolve('test-artifacts', `${suite}.tap`);
const reporters = [
  `--test-reporter=${path.resolve('test', 'summary-reporter.mjs')}`,
  '--test-reporter-destination=stdout',
  '--test-reporter=tap',
  `--test-reporter-destination=${tapFile}`,
];
// How long one test file may run before it fails as timed out, naming the tests it had not
// finished: a hang (a page that never settles, a server that never answers) must fail the run, not
// hold it until CI's own limit. Several times the slowest file of each suite on a busy 2-core
// machine (unit about 2 min, browser about 1 min, resilience's soak 15 min, the log-hygiene run of
// the whole suite about 6 min).
const FILE_TIMEOUT_MINUTES =
  { unit: 10, browser: 10, resilience: 30, contract: 15, 'log-hygiene': 30 }[
    suite as 'unit' | 'browser' | 'resilience' | 'contract' | 'log-hygiene'
  ] ?? 10;
const child = spawn(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    `--test-concurrency=${process.env.TEST_CONCURRENCY ?? '2'}`,
    `--test-timeout=${FILE_TIMEOUT_MINUTES * 60_000}`,
    ...reporters,
    ...testFiles(),
  ],
  {
    stdio: 'inherit',
    env: {
      ...process.env,
      TEST_ADMIN_DATABASE_URL: adminUrl,
      TEST_RUN_ID: runId,
      // Every answer of every service the unit suite starts must match its OpenAPI document (a
      // mismatch is a 500 that fails the test). The resilience and browser suites provoke failures
      // on purpose and are left out.
      ...(suite === 'unit' && { OPENAPI_RESPONSE_CHECK: '1' }),
    },
  },
);
const code: number = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));

const admin = new pg.Client({ connectionString: adminUrl });
try {
  await admin.connect();
  const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${runId}%`]);
  for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  // The idp's per-database login roles are cluster-wide; a crashed test file may leave them behind.
  const roles = await admin.query<{ rolname: string }>('SELECT rolname FROM pg_roles WHERE rolname LIKE $1', [`${runId}%`]);
  for (const { rolname } of roles.rows) await admin.query(`DROP ROLE IF EXISTS "${rolname}"`);
} catch (err) {
  console.error(`could not drop the test databases: ${(err as Error).message}`);
} finally {
  await admin.end().catch(() => {});
}
await cleanup();
process.exit(code);
