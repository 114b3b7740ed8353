// The schema cache notices a migration without a restart, as PostgREST's does: a name the planner
// misses (a new table, column, foreign key or function) reloads it once, at a bounded rate; and
// `NOTIFY pgrst, 'reload schema'` reloads it for changes no request would miss (a second foreign
// key that makes an embedding ambiguous), through a LISTEN connection that comes back when cut.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { MISS_RELOAD_INTERVAL_MS } from '../src/idp/rest/schema-cache.js';
import { type RunningIdp, startIdp } from './helpers/idp.js';
import { serviceClient } from './helpers/supabase.js';

let idp: RunningIdp;
let db: pg.Client;

before(async () => {
  idp = await startIdp({ env: { LOG_LEVEL: 'debug' } });
  db = new pg.Client({ connectionString: idp.databaseUrl });
  await db.connect();
  await db.query(`
    create table public.owners (id int primary key, name text not null);
    create table public.pets (id int primary key, name text not null, owner_id int, sitter_id int);
    grant select on public.owners, public.pets to service_role;
    insert into public.owners values (1, 'Ola'), (2, 'Per');
    insert into public.pets values (1, 'Rex', 1, 2);`);
});
after(async () => {
  await db?.end();
  await idp?.close();
});

/** Waits (bounded) until `check` passes: returns as soon as it does. */
async function eventually<T>(attempt: () => PromiseLike<T>, ok: (value: T) => boolean, what: string, limitMs = 20_000): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await attempt();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)} after ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const loads = (reason: string) => idp.logs.lines().filter((l) => l.msg === 'schema cache loaded' && l.reason === reason).length;
const listenerPids = async () =>
  (
    await db.query<{ pid: number }>(`select pid from pg_stat_activity where datname = current_database() and query = 'LISTEN pgrst'`)
  ).rows.map((r) => r.pid);

describe('a miss reloads the cache', () => {
  test('a foreign key added after start is found on the first request that needs it', async () => {
    const before = await serviceClient(idp).from('pets').select('name, owners(name)');
    assert.equal(before.error?.code, 'PGRST200');
    await db.query('alter table public.pets add constraint pets_owner_id_fkey foreign key (owner_id) references public.owners (id)');
    const { data, error } = await serviceClient(idp).from('pets').select('name, owners(name)');
    assert.equal(error, null);
    assert.deepEqual(data, [{ name: 'Rex', owners: { name: 'Ola' } }]);
  });

  test('a column added and a table created after start are found; a dropped column does not break select=*', async () => {
    await db.query(`alter table public.pets add column age int; create table public.vets (id int primary key);
      grant select on public.vets to service_role`);
    assert.deepEqual((await serviceClient(idp).from('pets').select('name, age')).data, [{ name: 'Rex', age: null }]);
    assert.deepEqual((await serviceClient(idp).from('vets').select('*')).data, []);
    await db.query('alter table public.pets drop column age');
    // The cache still lists age; * is the table's row, not the cached column list.
    assert.deepEqual((await serviceClient(idp).from('pets').select('*')).data, [{ id: 1, name: 'Rex', owner_id: 1, sitter_id: 2 }]);
    const gone = await serviceClient(idp).from('pets').select('age');
    assert.equal(gone.error?.code, '42703');
  });

  test('many requests for names that do not exist reload at most once per interval', async () => {
    const start = Date.now();
    const before = loads('miss');
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => serviceClient(idp).from(`missing_${i}`).select('*')));
    const elapsed = Date.now() - start;
    for (const a of answers) assert.equal(a.error?.code, 'PGRST205');
    const reloads = loads('miss') - before;
    assert.ok(reloads >= 1, 'the first miss reloads');
    assert.ok(reloads <= Math.ceil(elapsed / MISS_RELOAD_INTERVAL_MS) + 1, `${reloads} reloads in ${elapsed} ms`);
  });
});

describe("NOTIFY pgrst, 'reload schema'", () => {
  const embedOwners = () => serviceClient(idp).from('pets').select('name, owners(name)');

  test('reloads a change no request misses: a second foreign key makes the embedding ambiguous', async () => {
    await db.query('alter table public.pets add constraint pets_sitter_id_fkey foreign key (sitter_id) references public.owners (id)');
    // Nothing missed: the cache still knows one relationship.
    assert.equal((await embedOwners()).status, 200);
    await db.query(`notify pgrst, 'reload schema'`);
    const after = await eventually(embedOwners, (r) => r.status === 300, 'PGRST201 after NOTIFY');
    assert.equal(after.error?.code, 'PGRST201');
    assert.ok(loads('notify') >= 1);
    await db.query('alter table public.pets drop constraint pets_sitter_id_fkey');
    await db.query(`notify pgrst`); // an empty payload reloads too
    await eventually(embedOwners, (r) => r.status === 200, 'one relationship again');
  });

  test('the LISTEN connection comes back when cut, reloads on its return, and keeps listening', async () => {
    const [listener] = await eventually(listenerPids, (pids) => pids.length === 1, 'one listener');
    await db.query('select pg_terminate_backend($1)', [listener]);
    await eventually(listenerPids, (pids) => pids.length === 1 && pids[0] !== listener, 'a new listener');
    await eventually(
      async () => loads('reconnect'),
      (n) => n >= 1,
      'a reload on reconnecting',
    );
    await db.query('alter table public.pets add constraint pets_sitter_id_fkey foreign key (sitter_id) references public.owners (id)');
    assert.equal((await embedOwners()).status, 200);
    await db.query(`notify pgrst, 'reload schema'`);
    await eventually(embedOwners, (r) => r.status === 300, 'PGRST201 after NOTIFY on the new connection');
  });
});
