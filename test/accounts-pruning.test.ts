// The periodic prune: sessions that can never be used again are deleted once ended for longer than
// the retention, used or expired email tokens at once, in bounded batches, by several instances at
// once without error; live rows stay and refresh-token reuse detection still works. Real PostgreSQL;
// time is the injected clock, except where the app's own timer is the subject.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { manualClock } from '../src/kit/clock.js';
import { ConfigErrors, loadConfig } from '../src/kit/config.js';
import type { App } from '../src/kit/http/app.js';
import { accountsConfig } from '../src/accounts/config.js';
import { EmailTokens } from '../src/accounts/email-tokens.js';
import { ENDED_SESSION_RETENTION_MS, PRUNE_BATCH_SIZE, type PrunerOptions, createPruner } from '../src/accounts/pruning.js';
import type { PublicUser } from '../src/accounts/repository.js';
import { INVALID_REFRESH_TOKEN } from '../src/accounts/sessions.js';
import { TEST_SECRET, accountsSuite, assertError, startAccounts, json, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';
import { LogCapture } from './helpers/logs.js';

const suite = accountsSuite();
const clock = manualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
const PASSWORD = 'pruning password 1';
const MINUTE = 60_000;
const DAY = 86_400_000;
const IDLE = 7 * DAY; // the SESSION_IDLE_TIMEOUT default
const LIFETIME = 30 * DAY; // the SESSION_MAX_LIFETIME default
let app: App;

before(async () => {
  app = await suite.app({ PRUNE_INTERVAL: '0' }, { clock });
});

function pruner(overrides: Partial<PrunerOptions> = {}) {
  return createPruner({ pool: suite.pool, clock, idleMs: IDLE, maxLifetimeMs: LIFETIME, ...overrides });
}

async function newUser(label: string): Promise<PublicUser> {
  return registerUser(app, { name: 'Pruned User', email: uniqueEmail(label), password: PASSWORD });
}

const sha256 = (value: string | Buffer) => createHash('sha256').update(value).digest();

/** A session row as the service writes it, at the given times (ms before the clock's now). */
async function insertSession(userId: string, at: { createdAgo: number; lastUsedAgo: number; endedAgo?: number }): Promise<string> {
  const now = clock();
  const { rows } = await suite.pool.query<{ id: string }>(
    `INSERT INTO sessions (user_id, refresh_token_hash, created_at, last_used_at, ip, ended_at, end_reason)
     VALUES ($1, $2, $3, $4, '127.0.0.1', $5, $6) RETURNING id`,
    [
      userId,
      sha256(randomBytes(32)),
      new Date(now - at.createdAgo),
      new Date(now - at.lastUsedAgo),
      at.endedAgo === undefined ? null : new Date(now - at.endedAgo),
      at.endedAgo === undefined ? null : 'logout',
    ],
  );
  return rows[0]!.id;
}

/** Email tokens of one user: `count` rows with these times (ms relative to now; used: ms ago). */
async function insertEmailTokens(userId: string, count: number, at: { expiresIn: number; usedAgo?: number }): Promise<void> {
  const now = clock();
  await suite.pool.query(
    `INSERT INTO email_tokens (token_hash, purpose, user_id, created_at, expires_at, used_at)
     SELECT sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())), 'password_reset', $1, $2, $3, $4 FROM generate_series(1, $5)`,
    [userId, new Date(now - MINUTE), new Date(now + at.expiresIn), at.usedAgo === undefined ? null : new Date(now - at.usedAgo), count],
  );
}

const sessionIds = async (userId: string) =>
  new Set((await suite.pool.query<{ id: string }>('SELECT id FROM sessions WHERE user_id = $1', [userId])).rows.map((r) => r.id));
const emailTokenCount = async (userId: string) =>
  Number((await suite.pool.query('SELECT count(*) FROM email_tokens WHERE user_id = $1', [userId])).rows[0].count);
const auditCount = async () => Number((await suite.pool.query('SELECT count(*) FROM audit_log')).rows[0].count);

test('sessions ended, idle-expired or past their lifetime go once older than the retention; live ones and those within it stay', async () => {
  const user = await newUser('sessions');
  const R = ENDED_SESSION_RETENTION_MS;
  const gone = [
    await insertSession(user.id, { createdAgo: R + 2 * DAY, lastUsedAgo: R + DAY, endedAgo: R + MINUTE }), // logged out 7 days + 1 min ago
    await insertSession(user.id, { createdAgo: IDLE + R + DAY, lastUsedAgo: IDLE + R + MINUTE }), // idle for 14 days + 1 min
    await insertSession(user.id, { createdAgo: LIFETIME + R + MINUTE, lastUsedAgo: MINUTE }), // in use, but 37 days + 1 min old
  ];
  const kept = [
    await insertSession(user.id, { createdAgo: DAY, lastUsedAgo: MINUTE }), // live
    await insertSession(user.id, { createdAgo: R, lastUsedAgo: R - MINUTE, endedAgo: R - MINUTE }), // ended 7 days - 1 min ago
    await insertSession(user.id, { createdAgo: IDLE + R, lastUsedAgo: IDLE + R - MINUTE }), // idle-expired, within the retention
    await insertSession(user.id, { createdAgo: LIFETIME + R - MINUTE, lastUsedAgo: MINUTE }), // past its lifetime, within the retention
  ];
  const audit = await auditCount();
  const counts = await pruner().runOnce();
  assert.ok(counts.sessions >= gone.length, `deleted ${counts.sessions}`);
  assert.deepEqual(await sessionIds(user.id), new Set(kept), 'exactly the sessions past the retention are deleted');
  assert.equal(await auditCount(), audit, 'the audit log is never pruned');
});

test('used and expired email tokens go at once; an unused, unexpired one stays and still works', async () => {
  const user = await newUser('email-tokens');
  await insertEmailTokens(user.id, 2, { expiresIn: 30 * MINUTE, usedAgo: 1000 }); // used a second ago
  await insertEmailTokens(user.id, 3, { expiresIn: -1000 }); // expired a second ago
  await insertEmailTokens(user.id, 1, { expiresIn: 0 }); // expires now: no longer accepted (expires_at > now)
  const live = randomBytes(32).toString('base64url');
  await suite.pool.query(
    `INSERT INTO email_tokens (token_hash, purpose, user_id, created_at, expires_at) VALUES ($1, 'password_reset', $2, $3, $4)`,
    [sha256(live), user.id, new Date(clock()), new Date(clock() + 30 * MINUTE)],
  );
  await pruner().runOnce();
  assert.equal(await emailTokenCount(user.id), 1);
  assert.equal(await new EmailTokens(suite.pool).peek(live, 'password_reset', clock()), user.id, 'the live token still works');
});

test('reuse detection still works: a live session is never pruned, a replay ends it and is audited; the ended session is kept through the retention', async () => {
  const user = await newUser('reuse');
  const login = await json(app, 'POST', '/auth/login', { email: user.email, password: PASSWORD });
  assert.equal(login.statusCode, 200, login.body);
  const first = login.json().data.refresh_token as string;
  clock.advance(1000);
  const rotated = await json(app, 'POST', '/auth/refresh', { refresh_token: first });
  assert.equal(rotated.statusCode, 200, rotated.body);
  const second = rotated.json().data.refresh_token as string;
  const [sessionId] = await sessionIds(user.id);

  clock.advance(MINUTE);
  await pruner().runOnce();
  assert.deepEqual(await sessionIds(user.id), new Set([sessionId]), 'the live session is kept');
  assertError(await json(app, 'POST', '/auth/refresh', { refresh_token: first }), 401, INVALID_REFRESH_TOKEN);
  const reused = await suite.pool.query(`SELECT event, details FROM audit_log WHERE target_id = $1 AND event = 'refresh_token_reused'`, [
    user.id,
  ]);
  assert.equal(reused.rows.length, 1, 'the replay is recognised as reuse');
  assert.equal(reused.rows[0].details.session_id, sessionId);

  // Within the retention the ended session stays: its tokens are still known as an ended session's.
  clock.advance(ENDED_SESSION_RETENTION_MS - MINUTE);
  await pruner().runOnce();
  assert.deepEqual(await sessionIds(user.id), new Set([sessionId]));
  assertError(await json(app, 'POST', '/auth/refresh', { refresh_token: second }), 401, INVALID_REFRESH_TOKEN);

  clock.advance(2 * MINUTE);
  await pruner().runOnce();
  assert.equal((await sessionIds(user.id)).size, 0, 'deleted once past the retention');
  // A token of a deleted session answers exactly as one of an ended session did.
  assertError(await json(app, 'POST', '/auth/refresh', { refresh_token: second }), 401, INVALID_REFRESH_TOKEN);
  clock.advance(-ENDED_SESSION_RETENTION_MS - 2 * MINUTE);
});

test('each statement deletes at most one batch, and a run stops after its maximum of batches; the next run goes on', async () => {
  const user = await newUser('batches');
  await insertEmailTokens(user.id, 2 * PRUNE_BATCH_SIZE + 500, { expiresIn: -DAY });
  const deletes: number[] = [];
  const pool = suite.pool;
  const counting = {
    query: async (sql: string, params: unknown[]) => {
      const result = await pool.query(sql, params);
      if (sql.includes('DELETE FROM email_tokens')) deletes.push(result.rowCount ?? 0);
      return result;
    },
  } as unknown as typeof pool;
  const first = await pruner({ pool: counting, maxBatches: 2 }).runOnce();
  assert.equal(first.emailTokens, 2 * PRUNE_BATCH_SIZE);
  assert.deepEqual(deletes, [PRUNE_BATCH_SIZE, PRUNE_BATCH_SIZE]);
  assert.equal(await emailTokenCount(user.id), 500);
  const second = await pruner({ pool: counting, maxBatches: 2 }).runOnce();
  assert.equal(second.emailTokens, 500);
  assert.deepEqual(deletes, [PRUNE_BATCH_SIZE, PRUNE_BATCH_SIZE, 500]);
  assert.equal(await emailTokenCount(user.id), 0);
});

test('two instances pruning at once delete every row exactly once, without error', async () => {
  const user = await newUser('concurrent');
  await insertEmailTokens(user.id, 3000, { expiresIn: -DAY });
  for (let i = 0; i < 50; i++) await insertSession(user.id, { createdAgo: 60 * DAY, lastUsedAgo: 50 * DAY });
  const [a, b] = await Promise.all([pruner({ batchSize: 100 }).runOnce(), pruner({ batchSize: 100 }).runOnce()]);
  assert.equal(a.emailTokens + b.emailTokens, 3000);
  assert.equal(a.sessions + b.sessions >= 50, true);
  assert.equal(await emailTokenCount(user.id), 0);
  assert.equal((await sessionIds(user.id)).size, 0);
});

test('a row another transaction holds (a refresh in progress) is skipped, not waited for', async () => {
  const user = await newUser('locked');
  const id = await insertSession(user.id, { createdAgo: 60 * DAY, lastUsedAgo: 50 * DAY });
  const holder = await suite.pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE', [id]);
    await pruner().runOnce();
    assert.ok((await sessionIds(user.id)).has(id), 'the locked row is left for a later run');
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
  }
  await pruner().runOnce();
  assert.equal((await sessionIds(user.id)).size, 0);
});

test('PRUNE_INTERVAL: 1h by default, 0 turns pruning off, anything else not a duration is refused', () => {
  assert.equal(loadConfig(accountsConfig, { JWT_SECRET: TEST_SECRET }).PRUNE_INTERVAL, 3600);
  assert.equal(loadConfig(accountsConfig, { JWT_SECRET: TEST_SECRET, PRUNE_INTERVAL: '0' }).PRUNE_INTERVAL, 0);
  assert.equal(loadConfig(accountsConfig, { JWT_SECRET: TEST_SECRET, PRUNE_INTERVAL: '15m' }).PRUNE_INTERVAL, 900);
  for (const bad of ['-1', '1.5h', 'never', '00', ' 1h']) {
    assert.throws(() => loadConfig(accountsConfig, { JWT_SECRET: TEST_SECRET, PRUNE_INTERVAL: bad }), ConfigErrors, bad);
  }
});

test('the app prunes every PRUNE_INTERVAL and logs the counts at info; with 0 it never does; close stops it', async () => {
  const logs = new LogCapture();
  const every = await startAccounts({ env: { PRUNE_INTERVAL: '1s', LOG_LEVEL: 'info' }, logs, clock });
  const off = await startAccounts({ env: { PRUNE_INTERVAL: '0', LOG_LEVEL: 'info' }, clock });
  try {
    for (const service of [every, off]) {
      const user = await registerUser(service.app, { name: 'Timer User', email: uniqueEmail('timer'), password: PASSWORD });
      await service.pool.query(
        `INSERT INTO email_tokens (token_hash, purpose, user_id, created_at, expires_at) VALUES ($1, 'email_verification', $2, $3, $3)`,
        [sha256(randomBytes(32)), user.id, new Date(clock() - DAY)],
      );
    }
    const count = async (service: typeof every) => Number((await service.pool.query('SELECT count(*) FROM email_tokens')).rows[0].count);
    const deadline = Date.now() + 10_000;
    while ((await count(every)) > 0 && Date.now() < deadline) await sleep(100);
    assert.equal(await count(every), 0, 'pruned within the interval');
    assert.equal(await count(off), 1, 'PRUNE_INTERVAL=0: nothing is deleted');
    // On a loaded machine a run can come before the token is inserted (registering takes longer
    // than the 1 s interval); such runs log 0. Exactly one run reports the token.
    const runs = logs.lines().filter((line) => line.event === 'pruned');
    assert.ok(runs.length > 0, 'each run is logged');
    for (const run of runs) {
      assert.equal(run.level, 30, 'at info');
      assert.equal(typeof run.sessions, 'number');
    }
    assert.deepEqual(
      runs.map((run) => run.emailTokens).filter((deleted) => deleted !== 0),
      [1],
      'one run logs the one expired token it deleted',
    );
  } finally {
    await every.close();
    await off.close();
  }
  const lines = logs.lines().length;
  await sleep(1500);
  assert.equal(logs.lines().length, lines, 'no run after close');
});
