// Every service through PgBouncer in transaction pooling mode, two instances of
// each, with fewer server connections than the instances' pools hold clients:
// consecutive transactions of one client connection run on different server
// connections. Nothing may depend on session state: the migration lock is
// transaction-scoped, the idp's role and claims are set per transaction, and
// named statements (which PgBouncer 1.18 does not track) are sent unnamed
// (DATABASE_NAMED_STATEMENTS=false). The exactness checks are those of the load
// tests: every redirect counted once, one registration of an email, each user
// seeing only their own notes.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { authenticatorPassword, authenticatorRoleName } from '../../src/idp/authenticator.js';
import { createPool, type Migration, migrate, readMigrations } from '../../src/kit/db.js';
import { adminUrl, freshDatabase, type TestDatabase } from '../helpers/database.js';
import type { ServiceProcess } from '../helpers/process.js';
import { shortenerMigrations } from '../helpers/shortener.js';
import { createNote, notesUser } from './helpers/api.js';
import { reportFigures, round } from './helpers/figures.js';
import { jsonOf, keepAliveAgent, send, type Target } from './helpers/http.js';
import { findPgBouncer, type PgBouncer, startPgBouncer } from './helpers/pgbouncer.js';
import { queryOnce } from './helpers/postgres.js';
import { ensureStopped, IDP_KEYS, startAccounts, startIdpProcess, startNotesProcess, startShortener } from './helpers/services.js';
import { uniqueEmail } from '../helpers/emails.js';
import { idpDatabase } from '../helpers/idp.js';

const POOL_SIZE = 4; // server connections per (database, user); each service instance's pool holds up to 20 clients
const REDIRECTS = 4000;
const CODES = 20;
const RACERS = 20;
const NOTES_PER_USER = 20;
const UNNAMED = { DATABASE_NAMED_STATEMENTS: 'false' };

const binary = findPgBouncer();
// CI installs pgbouncer (.ci/run): there, a missing binary fails the test instead of skipping it.
const skip = binary === undefined && !process.env.CI ? 'pgbouncer is not installed (apt-get install pgbouncer); skipped outside CI' : false;
if (skip) console.log(`# pgbouncer.test.ts skipped: ${skip}`);

describe('through PgBouncer (pool_mode = transaction)', { skip }, () => {
  let bouncer: PgBouncer;
  let shortenerDb: TestDatabase;
  let accountsDb: TestDatabase;
  let idpDb: TestDatabase;
  let migrationsDb: TestDatabase;
  let authenticator: { name: string; password: string };
  const processes: ServiceProcess[] = [];

  before(async () => {
    if (binary === undefined)
      throw new Error('pgbouncer not found (/usr/sbin/pgbouncer or PATH): CI must install it (apt-get install -y pgbouncer)');
    // Shortener and accounts start on empty databases: their two instances migrate at once.
    shortenerDb = await freshDatabase('pgb_shortener', []);
    accountsDb = await freshDatabase('pgb_accounts', []);
    migrationsDb = await freshDatabase('pgb_migrations', []);
    idpDb = await idpDatabase();
    // The idp's REST pool logs in as its per-database role with a password derived from the
    // secret key; PgBouncer authenticates clients itself, so it must know that password too.
    const role = authenticatorRoleName(idpDb.name);
    authenticator = { name: role, password: authenticatorPassword(IDP_KEYS.secret, role) };
    bouncer = await startPgBouncer(binary, adminUrl(), { poolSize: POOL_SIZE, users: [authenticator], statementTimeoutMillis: 10_000 });
  });

  after(async () => {
    for (const p of processes) await ensureStopped(p);
    await bouncer?.stop();
    for (const db of [shortenerDb, accountsDb, migrationsDb, idpDb]) await db?.drop();
  });

  /** Starts both instances at the same moment (their migrations race) and keeps them for cleanup. */
  async function startTwo(start: (i: number) => Promise<ServiceProcess>): Promise<ServiceProcess[]> {
    const settled = await Promise.allSettled([start(0), start(1)]);
    for (const s of settled) if (s.status === 'fulfilled') processes.push(s.value);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    return settled.map((s) => (s as PromiseFulfilledResult<ServiceProcess>).value);
  }

  const statusCounts = (outcomes: Awaited<ReturnType<typeof send>>[]) => {
    const statuses: Record<string, number> = {};
    for (const o of outcomes) statuses[o.ok ? String(o.status) : o.error] = (statuses[o.ok ? String(o.status) : o.error] ?? 0) + 1;
    return statuses;
  };

  test('two migration runs at once through the pooler apply each file exactly once', async (t) => {
    const scope = 'pooled';
    const migrations: Migration[] = [
      // Slow enough that both runs overlap; without a lock that holds through the pooler the
      // second CREATE TABLE would fail, or both runs would record the file.
      { name: '001_slow.sql', sql: 'SELECT pg_sleep(0.5); CREATE TABLE pooled_once (id int)' },
      { name: '002_row.sql', sql: 'INSERT INTO pooled_once VALUES (1)' },
    ];
    const pools = [createPool(bouncer.url(migrationsDb.name), { max: 3 }), createPool(bouncer.url(migrationsDb.name), { max: 3 })];
    // Other clients of the same database and user keep the pooler's server connections busy, as
    // request traffic of running instances would: consecutive statements of one run outside a
    // transaction then land on different server connections.
    const traffic = createPool(bouncer.url(migrationsDb.name), { max: 6 });
    let running = true;
    let trafficQueries = 0;
    const workers = Array.from({ length: 6 }, async () => {
      while (running) {
        await traffic.query('SELECT pg_sleep(0.005)');
        trafficQueries += 1;
      }
    });
    let results: string[][];
    try {
      results = await Promise.all(pools.map((p) => migrate(p, scope, migrations)));
    } finally {
      running = false;
      await Promise.all(workers);
      await Promise.all([...pools, traffic].map((p) => p.end()));
    }
    const [rows] = await queryOnce<{ n: number }>(migrationsDb.url, 'SELECT count(*)::int AS n FROM pooled_once');
    const recorded = await queryOnce<{ name: string }>(
      migrationsDb.url,
      'SELECT name FROM schema_migrations WHERE scope = $1 ORDER BY name',
      [scope],
    );
    reportFigures(t, 'concurrent migrations through PgBouncer', {
      runs: 2,
      applied: results.map((r) => r.length).join('+'),
      rows: rows!.n,
      traffic_queries: trafficQueries,
    });
    assert.deepEqual(results.flat().sort(), ['001_slow.sql', '002_row.sql']);
    assert.ok(results.some((r) => r.length === 2) && results.some((r) => r.length === 0), JSON.stringify(results));
    assert.equal(rows!.n, 1);
    assert.deepEqual(
      recorded.map((r) => r.name),
      ['001_slow.sql', '002_row.sql'],
    );
  });

  test(`shortener: two instances start at once, then ${REDIRECTS} concurrent redirects: every one a 302, clicks == 302s per code`, async (t) => {
    const instances = await startTwo(() => startShortener(bouncer.url(shortenerDb.name), { env: UNNAMED }));
    const migrated = await queryOnce<{ name: string }>(
      shortenerDb.url,
      "SELECT name FROM schema_migrations WHERE scope = 'shortener' ORDER BY name",
    );
    assert.deepEqual(
      migrated.map((r) => r.name),
      (await shortenerMigrations()).map((m) => m.name),
      'each migration recorded once',
    );
    await queryOnce(
      shortenerDb.url,
      `INSERT INTO links (code, original_url)
       SELECT 'c' || lpad(i::text, 6, '0'), 'https://example.com/page/' || i FROM generate_series(0, $1 - 1) AS i`,
      [CODES],
    );
    const codes = Array.from({ length: CODES }, (_, i) => `c${String(i).padStart(6, '0')}`);
    const targets: Target[] = instances.map((instance) => ({ url: instance.url, agent: keepAliveAgent(50) }));

    const visits = Array.from({ length: REDIRECTS }, () => codes[Math.floor(Math.random() * CODES)]!);
    const started = performance.now();
    const outcomes = await Promise.all(visits.map((code, i) => send(targets[i % 2]!, { path: `/${code}` }, 60_000)));
    const elapsedMs = performance.now() - started;
    for (const target of targets) (target.agent as { destroy(): void }).destroy();

    const statuses = statusCounts(outcomes);
    const redirects = new Map(codes.map((c) => [c, 0]));
    outcomes.forEach((o, i) => {
      if (o.ok && o.status === 302) redirects.set(visits[i]!, redirects.get(visits[i]!)! + 1);
    });
    const rows = await queryOnce<{ code: string; clicks: number }>(
      shortenerDb.url,
      'SELECT code, clicks FROM links WHERE clicks > 0 ORDER BY code',
    );
    const clicks = new Map(rows.map((r) => [r.code, r.clicks]));
    const mismatched = codes.filter((c) => (clicks.get(c) ?? 0) !== redirects.get(c));
    const total = rows.reduce((sum, r) => sum + r.clicks, 0);
    reportFigures(t, `${REDIRECTS} concurrent redirects, 2 instances through PgBouncer`, {
      pgbouncer: bouncer.version,
      server_connections: POOL_SIZE,
      redirects: REDIRECTS,
      statuses,
      clicks_stored: total,
      rps: Math.round(REDIRECTS / (elapsedMs / 1000)),
      elapsed_ms: round(elapsedMs),
    });
    assert.deepEqual(statuses, { 302: REDIRECTS }, 'every redirect answered 302');
    assert.equal(total, REDIRECTS, 'clicks stored == 302s received');
    assert.deepEqual(mismatched, [], 'codes whose clicks differ from their 302s');
    // Each click's visit is written by the same statement, through the transaction pooler too.
    const [stored] = await queryOnce<{ visits: number }>(
      shortenerDb.url,
      'SELECT coalesce(sum(visits), 0)::int AS visits FROM visit_counts',
    );
    assert.equal(stored!.visits, REDIRECTS, 'visits stored == 302s received');
  });

  test(`accounts: two instances start at once; ${RACERS} concurrent registrations of one email: exactly one 201; logins and profiles on both`, async (t) => {
    // One signing secret, so a token from either instance is accepted by both.
    const jwtSecret = randomBytes(32).toString('hex');
    const instances = await startTwo(() => startAccounts(bouncer.url(accountsDb.name), { env: { ...UNNAMED, JWT_SECRET: jwtSecret } }));
    const migrated = await queryOnce<{ name: string }>(accountsDb.url, "SELECT name FROM schema_migrations WHERE scope = 'accounts'");
    assert.deepEqual(
      migrated.map((r) => r.name),
      (await readMigrations(fileURLToPath(new URL('../../src/accounts/migrations', import.meta.url)))).map((m) => m.name),
      'each migration recorded once',
    );
    const targets: Target[] = instances.map((instance) => ({ url: instance.url, agent: keepAliveAgent(RACERS) }));
    const address = `race.${randomBytes(4).toString('hex')}@example.com`;
    const password = 'pooled-password-1';
    // Twenty different casings of one address (the bits of i pick which letters are upper case).
    const emails = Array.from({ length: RACERS }, (_, i) =>
      [...address].map((ch, k) => ((i >> (k % 5)) & 1 ? ch.toUpperCase() : ch)).join(''),
    );
    assert.equal(new Set(emails).size, RACERS);

    const started = performance.now();
    const registrations = await Promise.all(
      emails.map((email, i) =>
        send(targets[i % 2]!, { method: 'POST', path: '/auth/register', json: { name: `Racer ${i}`, email, password } }, 60_000),
      ),
    );
    const elapsedMs = performance.now() - started;
    const registered = statusCounts(registrations);
    assert.deepEqual(registered, { 201: 1, 400: RACERS - 1 });
    const stored = await queryOnce<{ email: string }>(accountsDb.url, 'SELECT email FROM users WHERE lower(email) = $1', [address]);
    assert.deepEqual(stored, [{ email: address }]);

    // Login and profile read the account with the queries the service names; unnamed through the
    // pooler they work on every instance, however often the server connection changes.
    const logins = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        send(targets[i % 2]!, { method: 'POST', path: '/auth/login', json: { email: address, password } }, 60_000),
      ),
    );
    assert.deepEqual(statusCounts(logins), { 200: 6 });
    const token = (jsonOf(logins[0]!) as { data: { token: string } }).data.token;
    const profiles = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        send(targets[i % 2]!, { path: '/auth/me', headers: { authorization: `Bearer ${token}` } }, 60_000),
      ),
    );
    for (const target of targets) (target.agent as { destroy(): void }).destroy();
    const profileStatuses = statusCounts(profiles);
    reportFigures(t, 'concurrent registration of one email, 2 instances through PgBouncer', {
      racers: RACERS,
      statuses: registered,
      logins: statusCounts(logins),
      profiles: profileStatuses,
      elapsed_ms: round(elapsedMs),
    });
    assert.deepEqual(profileStatuses, { 200: 200 });
  });

  test(`notes over two idp instances: ${NOTES_PER_USER} concurrent creates per user, each user lists exactly their own`, async (t) => {
    const idps = await startTwo(() => startIdpProcess(bouncer.url(idpDb.name), { env: UNNAMED }));
    // Each notes instance talks to its own idp instance.
    const notes = await startTwo((i) => startNotesProcess(idps[i]!.url));
    const targets: Target[] = notes.map((n) => ({ url: n.url, agent: keepAliveAgent(20) }));
    const users = [await notesUser(targets[0]!, uniqueEmail('pooled-a')), await notesUser(targets[1]!, uniqueEmail('pooled-b'))];

    // Both users at once, alternating instances: every REST transaction switches role and claims
    // on whichever server connection the pooler hands it.
    const started = performance.now();
    await Promise.all(
      users.flatMap((user, u) =>
        Array.from({ length: NOTES_PER_USER }, (_, i) => createNote(targets[(i + u) % 2]!, user.token, `user${u}-note${i}`)),
      ),
    );
    const elapsedMs = performance.now() - started;
    const listings = await Promise.all(
      users.flatMap((user) =>
        targets.map((target) => send(target, { path: '/notes', headers: { authorization: `Bearer ${user.token}` } }, 60_000)),
      ),
    );
    for (const target of targets) (target.agent as { destroy(): void }).destroy();

    const seen = listings.map((listing, k) => {
      assert.ok(listing.ok && listing.status === 200, `list: ${listing.ok ? listing.text : listing.error}`);
      const rows = jsonOf(listing) as Array<{ user_id: string; title: string }>;
      const user = Math.floor(k / 2);
      return { user, foreign: rows.filter((r) => r.user_id !== users[user]!.id).length, titles: rows.map((r) => r.title).sort() };
    });
    const owners = await queryOnce<{ user_id: string; n: number }>(
      idpDb.url,
      'SELECT user_id, count(*)::int AS n FROM public.notes GROUP BY user_id ORDER BY n',
    );
    reportFigures(t, 'notes isolation, 2 idp instances through PgBouncer', {
      creates: NOTES_PER_USER * users.length,
      listed_per_user: seen.map((s) => s.titles.length).join('+'),
      foreign_rows_seen: seen.reduce((sum, s) => sum + s.foreign, 0),
      elapsed_ms: round(elapsedMs),
    });
    for (const s of seen) {
      assert.equal(s.foreign, 0, 'a user saw a note of the other');
      assert.deepEqual(s.titles, Array.from({ length: NOTES_PER_USER }, (_, i) => `user${s.user}-note${i}`).sort());
    }
    assert.deepEqual(
      owners.map((o) => o.n),
      [NOTES_PER_USER, NOTES_PER_USER],
    );
  });

  test("no session state left behind: the pooler's server connections carry no role or claims outside a transaction; the statement timeout holds", async () => {
    // One client per server connection of the pool, at once, so every server connection answers.
    const clients = Array.from({ length: POOL_SIZE }, () => new pg.Client({ connectionString: bouncer.url(idpDb.name, authenticator) }));
    try {
      await Promise.all(clients.map((c) => c.connect()));
      const answers = await Promise.all(
        clients.map(async (c) => {
          await c.query('BEGIN');
          try {
            const { rows } = await c.query<{ role: string; claims: string | null; timeout: string }>(
              `SELECT current_user AS role, nullif(current_setting('request.jwt.claims', true), '') AS claims, current_setting('statement_timeout') AS timeout`,
            );
            // Held until all have answered, so no two clients share a server connection.
            await new Promise((r) => setTimeout(r, 200));
            return rows[0]!;
          } finally {
            await c.query('ROLLBACK');
          }
        }),
      );
      // The timeout clients cannot pass through the pooler comes from its connect_query.
      for (const a of answers) assert.deepEqual(a, { role: authenticator.name, claims: null, timeout: '10s' });
      const prepared = await clients[0]!.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements');
      assert.equal(prepared.rows[0]!.n, 0, 'a prepared statement stayed on a server connection');
    } finally {
      await Promise.all(clients.map((c) => c.end().catch(() => {})));
    }
  });
});
