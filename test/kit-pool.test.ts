import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPool, type Pool } from '../src/kit/db.js';
import { freshDatabase, type TestDatabase } from './helpers/database.js';

// Named statements and transaction poolers: a statement prepared under a name stays on the
// server connection that parsed it, which a pooler may not give back to the same client. With
// namedStatements: false the pool sends them unnamed, so nothing is left prepared on the server.

let db: TestDatabase;

before(async () => {
  db = await freshDatabase('kitpool', []);
});

after(async () => {
  await db.drop();
});

/** Runs a named query twice on one connection and returns what the server kept prepared. */
async function preparedAfterNamedQuery(pool: Pool): Promise<string[]> {
  const client = await pool.connect();
  try {
    for (const n of [1, 2]) {
      const { rows } = await client.query<{ n: number }>({ name: 'kit_pool_probe', text: 'SELECT $1::int AS n', values: [n] });
      assert.deepEqual(rows, [{ n }]);
    }
    const { rows } = await client.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name');
    return rows.map((r) => r.name);
  } finally {
    client.release();
  }
}

describe('createPool named statements', () => {
  it('by default a named query is prepared once on the server and reused by name', async () => {
    const pool = createPool(db.url, { max: 1 });
    try {
      assert.deepEqual(await preparedAfterNamedQuery(pool), ['kit_pool_probe']);
    } finally {
      await pool.end();
    }
  });

  it('namedStatements: false sends it unnamed: nothing stays prepared on the server connection', async () => {
    const pool = createPool(db.url, { max: 1, namedStatements: false });
    try {
      assert.deepEqual(await preparedAfterNamedQuery(pool), []);
      // Plain text queries and parameters work as before.
      const { rows } = await pool.query<{ s: string }>('SELECT $1::text AS s', ['unchanged']);
      assert.deepEqual(rows, [{ s: 'unchanged' }]);
    } finally {
      await pool.end();
    }
  });
});
