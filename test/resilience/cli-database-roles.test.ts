// `npm start` on its embedded PostgreSQL (and one service started alone on
// its own embedded PostgreSQL): every service with a database
// connects as a login role of its own, which is no superuser, owns its own
// database and nothing else, and cannot connect to another service's. The
// superuser stays with the launcher. The services still work end to end
// (accounts, shortener, notes through the idp's REST login role), also on a
// DATA_DIR from before, whose tables the superuser owns.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { authenticatorPassword } from '../../src/idp/authenticator.js';
import { startServiceProcess } from '../helpers/process.js';
import { createLink, createNote, notesUser, registerAccount } from './helpers/api.js';
import { reportFigures } from './helpers/figures.js';
import { uniqueEmail } from '../helpers/emails.js';
import { freePorts } from '../helpers/ports.js';
import { withClient } from '../helpers/database.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SERVICES_WITH_A_DATABASE = ['idp', 'accounts', 'shortener'];
const START_BOUND_MS = 180_000;

const base = mkdtempSync(path.join(tmpdir(), 'svc-cli-roles-'));
// As root PostgreSQL runs as the `postgres` OS user, which must reach DATA_DIR.
chmodSync(base, 0o755);
const dataDir = path.join(base, 'data');
let launcher: { child: ChildProcess; exited: Promise<unknown> } | undefined;

after(async () => {
  await stopLauncher();
  rmSync(base, { recursive: true, force: true });
});

async function stopLauncher(): Promise<void> {
  if (!launcher) return;
  if (launcher.child.exitCode === null && launcher.child.signalCode === null) launcher.child.kill('SIGTERM');
  await launcher.exited;
  launcher = undefined;
}

let launcherOutput = '';

async function startLauncher(logLevel = 'warn'): Promise<Record<string, string>> {
  const [idp, accounts, shortener, notes, mailSmtp, mailWeb] = await freePorts(6);
  const ports = {
    IDP_PORT: idp!,
    ACCOUNTS_PORT: accounts!,
    SHORTENER_PORT: shortener!,
    NOTES_PORT: notes!,
    MAILDEV_SMTP_PORT: mailSmtp!,
    MAILDEV_WEB_PORT: mailWeb!,
  };
  const env: Record<string, string | undefined> = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: logLevel };
  for (const [name, port] of Object.entries(ports)) env[name] = String(port);
  // No REDIS_URL: the shortener's rate limit then counts in its own process, not in a Redis other runs share.
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'JWT_SECRET', 'IDP_SECRET_KEY', 'IDP_PUBLISHABLE_KEY', 'PORT', 'SMTP_URL'])
    delete env[name];
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src', 'dev', 'cli.ts')], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  launcherOutput = '';
  child.stdout!.on('data', (d) => (launcherOutput += d));
  child.stderr!.on('data', (d) => (launcherOutput += d));
  launcher = { child, exited: new Promise((resolve) => child.once('exit', resolve)) };
  const deadline = Date.now() + START_BOUND_MS;
  while (!out.includes('All services are up')) {
    if (child.exitCode !== null) throw new Error(`npm start exited with ${child.exitCode}: ${out}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up: ${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, `http://127.0.0.1:${v}`]));
}

function cluster() {
  const secrets = JSON.parse(readFileSync(path.join(dataDir, 'secrets.json'), 'utf8')) as Record<string, string>;
  const port = Number(readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3]);
  const url = (user: string, password: string, database: string) =>
    `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  return {
    secrets,
    superuser: (database: string) => url('postgres', secrets.EMBEDDED_PG_PASSWORD!, database),
    service: (name: string, database = name) => url(name, secrets[`DATABASE_PASSWORD_${name.toUpperCase()}`]!, database),
    url,
  };
}

/** The SQLSTATE of connecting with `url`, or 'connected'. */
async function connectOutcome(url: string): Promise<string> {
  try {
    await withClient(url, async () => {});
    return 'connected';
  } catch (err) {
    return (err as { code?: string }).code ?? (err as Error).message;
  }
}

async function endToEnd(urls: Record<string, string>): Promise<void> {
  await registerAccount({ url: urls.ACCOUNTS_PORT! }, uniqueEmail('roles'));
  await createLink({ url: urls.SHORTENER_PORT! }, '198.51.100.7');
  const user = await notesUser({ url: urls.NOTES_PORT! }, uniqueEmail('roles'));
  await createNote({ url: urls.NOTES_PORT! }, user.token, 'written through the idp login role');
}

test('every service connects as its own role: no superuser, owner of its database only, shut out of the others', async (t) => {
  const urls = await startLauncher();
  await endToEnd(urls);
  const c = cluster();

  // Who the running services are connected as (the services keep pooled connections open).
  const sessions = await withClient(c.superuser('postgres'), async (client) => {
    const { rows } = await client.query<{ datname: string; usename: string }>(
      `SELECT DISTINCT datname, usename FROM pg_stat_activity WHERE datname = ANY($1) AND pid <> pg_backend_pid() ORDER BY 1, 2`,
      [SERVICES_WITH_A_DATABASE],
    );
    return rows.map((r) => `${r.datname}:${r.usename}`);
  });
  assert.deepEqual(sessions, ['accounts:accounts', 'idp:idp', 'idp:idp_authenticator', 'shortener:shortener']);

  const figures: Record<string, number> = {};
  for (const name of SERVICES_WITH_A_DATABASE) {
    const password = c.secrets[`DATABASE_PASSWORD_${name.toUpperCase()}`];
    assert.ok(password && password.length >= 24, `no generated password for ${name} in secrets.json`);
    const who = await withClient(c.service(name), async (client) => {
      const { rows } = await client.query(
        `SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls, pg_get_userbyid(d.datdba) AS owner,
                has_database_privilege('public', current_database(), 'CONNECT') AS public_connect,
                (SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') AND tableowner <> current_user)::int AS foreign_tables,
                (SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema'))::int AS tables
           FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()`,
      );
      // A superuser reads the password hashes; the service must not.
      const authid = await client.query('SELECT 1 FROM pg_authid').then(
        () => 'read',
        (err: { code?: string }) => err.code,
      );
      return { ...rows[0], authid };
    });
    assert.deepEqual(who, {
      rolsuper: false,
      rolcreaterole: false,
      rolcreatedb: false,
      rolbypassrls: false,
      owner: name,
      public_connect: false,
      foreign_tables: 0,
      tables: who.tables,
      authid: '42501',
    });
    assert.ok(who.tables > 0, `${name} has no tables: its migrations did not run as its role`);
    figures[`${name} tables`] = who.tables;
    for (const other of [...SERVICES_WITH_A_DATABASE.filter((o) => o !== name), 'postgres', 'template1']) {
      // 42501: "permission denied for database" / no CONNECT privilege.
      assert.equal(await connectOutcome(c.service(name, other)), '42501', `${name} could connect to the ${other} database`);
    }
  }
  // The idp's REST login role reaches the idp database only.
  const restPassword = authenticatorPassword(c.secrets.IDP_SECRET_KEY!, 'idp_authenticator');
  assert.equal(await connectOutcome(c.url('idp_authenticator', restPassword, 'idp')), 'connected');
  assert.equal(await connectOutcome(c.url('idp_authenticator', restPassword, 'accounts')), '42501');
  assert.equal(await connectOutcome(c.url('idp_authenticator', restPassword, 'shortener')), '42501');
  reportFigures(t, 'npm start: one role per service, no superuser, no cross-database connect', {
    services: SERVICES_WITH_A_DATABASE.join(', '),
    'cross-database connects refused': SERVICES_WITH_A_DATABASE.length * (SERVICES_WITH_A_DATABASE.length + 1) + 2,
    ...figures,
  });
  await stopLauncher();
});

test('a DATA_DIR from before (database and tables owned by the superuser) is taken over by the service roles; no password reaches the log', async () => {
  await stopLauncher();
  // Bring the cluster back to how earlier versions left it: everything owned by the superuser, PUBLIC may connect.
  const { startEmbeddedPostgres } = await import('../../src/dev/embedded-postgres.js');
  const quiet = { info: () => {}, debug: () => {}, warn: () => {} };
  const embedded = await startEmbeddedPostgres(dataDir, quiet);
  try {
    for (const name of SERVICES_WITH_A_DATABASE) {
      await withClient(new URL(`/${name}`, embedded.adminUrl).toString(), async (client) => {
        await client.query(`ALTER DATABASE ${name} OWNER TO postgres`);
        await client.query(`GRANT ALL ON DATABASE ${name} TO PUBLIC`);
        await client.query(`REASSIGN OWNED BY ${name} TO postgres`);
      });
    }
    // Every statement in the server log, which the launcher prints at debug level: role passwords
    // must not be in any of them.
    await withClient(embedded.adminUrl, (client) => client.query(`ALTER SYSTEM SET log_statement = 'all'`));
  } finally {
    await embedded.stop();
  }

  const urls = await startLauncher('debug');
  await endToEnd(urls);
  const after = cluster();
  assert.match(launcherOutput, /ALTER ROLE/, 'the server log of role statements did not reach the output');
  const passwords = [
    ...Object.entries(after.secrets)
      .filter(([k]) => k.startsWith('DATABASE_PASSWORD_') || k === 'EMBEDDED_PG_PASSWORD')
      .map(([, v]) => v),
    authenticatorPassword(after.secrets.IDP_SECRET_KEY!, 'idp_authenticator'),
  ];
  assert.equal(passwords.length, SERVICES_WITH_A_DATABASE.length + 2);
  for (const password of passwords) assert.ok(!launcherOutput.includes(password), 'a database password is in the output');
  for (const name of SERVICES_WITH_A_DATABASE) {
    const owners = await withClient(after.superuser(name), async (client) => {
      const { rows } = await client.query<{ owner: string }>(
        `SELECT DISTINCT tableowner AS owner FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`,
      );
      return rows.map((r) => r.owner);
    });
    assert.deepEqual(owners, [name], `tables of ${name} are owned by ${owners.join(', ')}`);
    assert.equal(await connectOutcome(after.service(SERVICES_WITH_A_DATABASE.find((o) => o !== name)!, name)), '42501');
  }
  await stopLauncher();
});

test('a service started alone on its own embedded PostgreSQL connects as its own role too (the idp, which needs the most)', async () => {
  const ownDir = path.join(base, 'idp-alone');
  const idp = await startServiceProcess('src/idp/server.ts', {
    DATABASE_URL: '',
    DATA_DIR: ownDir,
    IDP_PUBLISHABLE_KEY: 'sb_publishable_alone_5mLcH2pQ8vRzN4kW1xYa',
    IDP_SECRET_KEY: 'sb_secret_alone_Q7nB3vT9cXe2LmP5sK8d',
    IDP_AUTOCONFIRM: 'true',
  });
  try {
    const secrets = JSON.parse(readFileSync(path.join(ownDir, 'secrets.json'), 'utf8')) as Record<string, string>;
    const port = Number(readFileSync(path.join(ownDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3]);
    const superuser = `postgres://postgres:${encodeURIComponent(secrets.EMBEDDED_PG_PASSWORD!)}@127.0.0.1:${port}/postgres`;
    const sessions = await withClient(superuser, async (client) => {
      const { rows } = await client.query<{ usename: string }>(
        `SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = 'idp' ORDER BY 1`,
      );
      return rows.map((r) => r.usename);
    });
    assert.deepEqual(sessions, ['idp', 'idp_authenticator']);
    const signUp = await fetch(`${idp.url}/auth/v1/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', apikey: 'sb_publishable_alone_5mLcH2pQ8vRzN4kW1xYa' },
      body: JSON.stringify({ email: uniqueEmail('alone'), password: 'alone-pw-12345' }),
    });
    assert.equal(signUp.status, 200, await signUp.text());
  } finally {
    assert.equal(await idp.stop(), 0, idp.output());
  }
});
