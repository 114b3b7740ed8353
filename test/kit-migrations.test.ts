import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createPool, type Migration, migrate, type Pool, readMigrations } from '../src/kit/db.js';
import { freshDatabase, type TestDatabase } from './helpers/database.js';

// An empty database per file; each test works in its own migration scope and tables.
let db: TestDatabase;
let pool: Pool;
let scopeCounter = 0;

before(async () => {
  db = await freshDatabase('kitmigrations', []);
  pool = createPool(db.url, { max: 6 });
});

after(async () => {
  await pool.end();
  await db.drop();
});

function newScope(): string {
  scopeCounter += 1;
  return `scope${scopeCounter}`;
}

async function recorded(scope: string): Promise<Array<{ name: string; checksum: string }>> {
  const { rows } = await pool.query<{ name: string; checksum: string }>(
    'SELECT name, checksum FROM schema_migrations WHERE scope = $1 ORDER BY applied_at, name',
    [scope],
  );
  return rows;
}

async function tableExists(name: string): Promise<boolean> {
  const { rows } = await pool.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [name]);
  return rows[0]!.t !== null;
}

describe('readMigrations', () => {
  it('reads the .sql files of a directory in name order, ignoring other files', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'migrations-'));
    try {
      await writeFile(path.join(dir, '010_later.sql'), 'SELECT 10;');
      await writeFile(path.join(dir, '002_second.sql'), 'SELECT 2;');
      await writeFile(path.join(dir, '001_first.sql'), 'SELECT 1;');
      await writeFile(path.join(dir, 'README.md'), 'not a migration');
      await writeFile(path.join(dir, '003_draft.sql.bak'), 'SELECT 3;');
      assert.deepEqual(await readMigrations(dir), [
        { name: '001_first.sql', sql: 'SELECT 1;' },
        { name: '002_second.sql', sql: 'SELECT 2;' },
        { name: '010_later.sql', sql: 'SELECT 10;' },
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('migrate', () => {
  it('applies migrations in order, records each with its checksum, and is idempotent', async () => {
    const scope = newScope();
    const migrations: Migration[] = [
      { name: '001_create.sql', sql: `CREATE TABLE ${scope}_items (id int PRIMARY KEY, label text)` },
      // Depends on 001: fails if the order were wrong.
      { name: '002_seed.sql', sql: `INSERT INTO ${scope}_items VALUES (1, 'one')` },
      { name: '003_alter.sql', sql: `ALTER TABLE ${scope}_items ADD COLUMN extra int NOT NULL DEFAULT 0` },
    ];
    assert.deepEqual(await migrate(pool, scope, migrations), ['001_create.sql', '002_seed.sql', '003_alter.sql']);
    const rows = await recorded(scope);
    assert.deepEqual(
      rows.map((r) => r.name),
      ['001_create.sql', '002_seed.sql', '003_alter.sql'],
    );
    for (const r of rows) assert.match(r.checksum, /^[0-9a-f]{64}$/);

    // Second run: nothing applied, the seed row is still single.
    assert.deepEqual(await migrate(pool, scope, migrations), []);
    const { rows: items } = await pool.query(`SELECT id, label, extra FROM ${scope}_items`);
    assert.deepEqual(items, [{ id: 1, label: 'one', extra: 0 }]);
    assert.equal((await recorded(scope)).length, 3);

    // A new migration appended later is the only one applied.
    const more = [...migrations, { name: '004_more.sql', sql: `INSERT INTO ${scope}_items VALUES (2, 'two')` }];
    assert.deepEqual(await migrate(pool, scope, more), ['004_more.sql']);
  });

  it('keeps scopes apart: the same file name in two scopes is two migrations', async () => {
    const a = newScope();
    const b = newScope();
    assert.deepEqual(await migrate(pool, a, [{ name: '001.sql', sql: `CREATE TABLE ${a}_t (x int)` }]), ['001.sql']);
    assert.deepEqual(await migrate(pool, b, [{ name: '001.sql', sql: `CREATE TABLE ${b}_t (x int)` }]), ['001.sql']);
    assert.ok(await tableExists(`${a}_t`));
    assert.ok(await tableExists(`${b}_t`));
  });

  it('two concurrent runs on one database apply each migration exactly once', async () => {
    const scope = newScope();
    const migrations: Migration[] = [
      // Slow enough that the two runs overlap; without the lock the second CREATE TABLE would fail.
      { name: '001_slow.sql', sql: `SELECT pg_sleep(0.3); CREATE TABLE ${scope}_once (id int)` },
      { name: '002_row.sql', sql: `INSERT INTO ${scope}_once VALUES (1)` },
    ];
    const other = createPool(db.url, { max: 2 });
    try {
      const results = await Promise.all([migrate(pool, scope, migrations), migrate(other, scope, migrations)]);
      assert.deepEqual(results.flat().sort(), ['001_slow.sql', '002_row.sql']);
      // One of them did all the work, the other found it done.
      assert.ok(results.some((r) => r.length === 2) && results.some((r) => r.length === 0), JSON.stringify(results));
    } finally {
      await other.end();
    }
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${scope}_once`);
    assert.equal(rows[0].n, 1);
    assert.equal((await recorded(scope)).length, 2);
  });

  it('a failing migration rolls back fully and is not recorded; the ones before it stay applied', async () => {
    const scope = newScope();
    const good: Migration = { name: '001_good.sql', sql: `CREATE TABLE ${scope}_good (id int)` };
    const bad: Migration = {
      name: '002_bad.sql',
      sql: `CREATE TABLE ${scope}_partial (id int); INSERT INTO ${scope}_good VALUES (1); SELECT no_such_function();`,
    };
    const after: Migration = { name: '003_after.sql', sql: `CREATE TABLE ${scope}_after (id int)` };
    await assert.rejects(migrate(pool, scope, [good, bad, after]), (err: Error) => {
      assert.match(err.message, new RegExp(`^migration ${scope}/002_bad\\.sql failed: .*no_such_function`));
      return true;
    });
    assert.deepEqual(
      (await recorded(scope)).map((r) => r.name),
      ['001_good.sql'],
    );
    assert.ok(await tableExists(`${scope}_good`));
    assert.equal(await tableExists(`${scope}_partial`), false, 'the failed migration left a table behind');
    assert.equal(await tableExists(`${scope}_after`), false, 'a migration after the failed one ran');
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${scope}_good`);
    assert.equal(rows[0].n, 0);

    // The lock was released and the connection is clean: a fixed migration applies.
    const fixed: Migration = { name: '002_bad.sql', sql: `CREATE TABLE ${scope}_partial (id int)` };
    assert.deepEqual(await migrate(pool, scope, [good, fixed, after]), ['002_bad.sql', '003_after.sql']);
  });

  it('refuses a migration that changed after it was applied', async () => {
    const scope = newScope();
    await migrate(pool, scope, [{ name: '001_t.sql', sql: `CREATE TABLE ${scope}_t (id int)` }]);
    await assert.rejects(
      migrate(pool, scope, [
        { name: '001_t.sql', sql: `CREATE TABLE ${scope}_t (id bigint)` },
        { name: '002_next.sql', sql: `CREATE TABLE ${scope}_next (id int)` },
      ]),
      new RegExp(`migration ${scope}/001_t\\.sql changed after it was applied`),
    );
    assert.equal(await tableExists(`${scope}_next`), false);
    // Nothing is held: the original set still runs (and finds everything applied).
    assert.deepEqual(await migrate(pool, scope, [{ name: '001_t.sql', sql: `CREATE TABLE ${scope}_t (id int)` }]), []);
  });

  it('returns every connection to the pool, even after a failure', async () => {
    const small = createPool(db.url, { max: 1, connectionTimeoutMillis: 2000 });
    try {
      const scope = newScope();
      await assert.rejects(migrate(small, scope, [{ name: '001.sql', sql: 'SELECT broken syntax here' }]));
      assert.deepEqual(await migrate(small, scope, [{ name: '001.sql', sql: 'SELECT 1' }]), ['001.sql']);
      assert.equal(small.totalCount - small.idleCount, 0);
    } finally {
      await small.end();
    }
  });

  it('the shortener migrations create the links table with its constraints', async () => {
    const scope = newScope();
    const migrations = await readMigrations(path.resolve('src/shortener/migrations'));
    // Its own schema, so the table name does not clash with anything of this file.
    await pool.query(`CREATE SCHEMA ${scope}`);
    const client = await pool.connect();
    try {
      await client.query(`SET search_path TO ${scope}`);
      for (const m of migrations) await client.query(m.sql);
      await client.query("INSERT INTO links (code, original_url) VALUES ('abcDEF1', 'https://example.com/')");
      await assert.rejects(client.query("INSERT INTO links (code, original_url) VALUES ('abcDEF1', 'https://x/')"), {
        code: '23505',
        constraint: 'links_pkey',
      });
      // A code is 3 to 64 of [A-Za-z0-9_-] (generated codes and custom back-halves alike).
      for (const bad of ['abc.EF1', 'ab', 'a'.repeat(65), 'abc EF1']) {
        await assert.rejects(
          client.query('INSERT INTO links (code, original_url) VALUES ($1, $2)', [bad, 'https://x/']),
          { code: '23514' },
          bad,
        );
      }
      await client.query("INSERT INTO links (code, original_url) VALUES ('my-launch_2', 'https://example.com/')");
      await assert.rejects(client.query("INSERT INTO links (code, original_url) VALUES ('abcDEF2', '')"), { code: '23514' });
      await assert.rejects(client.query('INSERT INTO links (code, original_url) VALUES ($1, $2)', ['abcDEF3', 'x'.repeat(2049)]), {
        code: '23514',
      });
      // Codes are case-sensitive: a different case is a different code.
      await client.query("INSERT INTO links (code, original_url) VALUES ('ABCdef1', 'https://example.com/')");
      const { rows } = await client.query("SELECT clicks, created_at FROM links WHERE code = 'abcDEF1'");
      assert.equal(rows[0].clicks, 0);
      assert.ok(rows[0].created_at instanceof Date);
    } finally {
      await client.query('RESET search_path').catch(() => {});
      client.release();
    }
  });
});
