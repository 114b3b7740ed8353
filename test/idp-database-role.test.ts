// The idp connected as a role of its own (LOGIN, owner of its database, no
// superuser, no CREATEROLE), as npm start runs it and as the README tells users
// to run it on their own PostgreSQL: its migrations run as that role, and REST
// works through the login role prepared by the superuser beforehand. Without
// that preparation it refuses to start with a message that says what to do.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import { authenticatorRoleName } from '../src/idp/authenticator.js';
import { prepareIdpRoles } from '../src/idp/bootstrap.js';
import { withDatabase } from '../src/kit/db.js';
import { adminUrl, withClient } from './helpers/database.js';
import { startIdp, TEST_PUBLISHABLE_KEY, TEST_SECRET_KEY } from './helpers/idp.js';
import { supabase } from './helpers/supabase.js';
import { uniqueEmail } from './helpers/emails.js';

const runId = process.env.TEST_RUN_ID ?? 'tlocal';
const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** An empty database owned by a new login role of the same name, closed to PUBLIC, as the README has users create it. */
async function ownDatabase(): Promise<{ name: string; url: string; superuserUrl: string }> {
  const name = `${runId}_idprole_${randomBytes(4).toString('hex')}`;
  const password = randomBytes(18).toString('base64url');
  await withClient(adminUrl(), async (admin) => {
    await admin.query(`CREATE ROLE "${name}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD '${password}'`);
    await admin.query(`CREATE DATABASE "${name}" OWNER "${name}"`);
    await admin.query(`REVOKE ALL ON DATABASE "${name}" FROM PUBLIC`);
  });
  cleanups.push(() =>
    withClient(adminUrl(), async (admin) => {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.query(`DROP ROLE IF EXISTS "${authenticatorRoleName(name)}"`);
      await admin.query(`DROP ROLE IF EXISTS "${name}"`);
    }),
  );
  const url = new URL(withDatabase(adminUrl(), name));
  url.username = name;
  url.password = password;
  return { name, url: url.toString(), superuserUrl: withDatabase(adminUrl(), name) };
}

test('as its own role, with the roles prepared by the superuser: migrations, sign-up and REST under RLS work', async () => {
  const db = await ownDatabase();
  await prepareIdpRoles(db.superuserUrl, TEST_SECRET_KEY);
  const idp = await startIdp({ databaseUrl: db.url });
  cleanups.push(() => idp.close());
  const client = supabase({ url: idp.url, publishableKey: TEST_PUBLISHABLE_KEY, secretKey: TEST_SECRET_KEY });
  const email = uniqueEmail('role');
  const signUp = await client.auth.signUp({ email, password: 'own-role-pw-1' });
  assert.equal(signUp.error, null);
  const inserted = await client.from('notes').insert({ title: 'through the prepared login role' }).select('title');
  assert.equal(inserted.error, null);
  assert.deepEqual(inserted.data, [{ title: 'through the prepared login role' }]);

  const owners = await withClient(db.superuserUrl, async (admin) => {
    const { rows } = await admin.query<{ owner: string }>(
      `SELECT DISTINCT tableowner AS owner FROM pg_tables WHERE schemaname IN ('public', 'auth')`,
    );
    return rows.map((r) => r.owner);
  });
  assert.deepEqual(owners, [db.name], 'the migrations did not run as the idp role');
});

test('as its own role, without a prepared login role: it refuses to start and says what to create', async () => {
  // The API roles are cluster-wide and exist by now; the login role of this database does not.
  const db = await ownDatabase();
  await assert.rejects(startIdp({ databaseUrl: db.url }), (err: Error) => {
    assert.match(err.message, new RegExp(`login role ${authenticatorRoleName(db.name)} is missing`));
    assert.match(err.message, /create it as superuser/);
    return true;
  });
});
