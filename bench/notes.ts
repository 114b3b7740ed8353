import { generateKeyPairSync, randomBytes } from 'node:crypto';
import pg from 'pg';
import { ensureDatabase, withDatabase } from '../src/kit/db.js';
import { type LoadResult, load, ratio, startCeiling, startService } from './lib.js';

// GET /notes for one user with 50 notes, 50 connections, 10 s: notes with
// remote token checks (one idp request per call) and with IDP_VERIFY=local,
// beside the idp's own GET /auth/v1/user (what a remote check costs by itself),
// the idp's REST read of the same 50 notes (what the store call costs by
// itself) and a bare node:http JSON server, all measured in this run.
//
// A remote GET /notes is one /auth/v1/user plus one REST read at the idp, so
// even a notes service costing nothing could not pass
// 1 / (1/user + 1/rest) requests/s; that bound is printed beside the ratio.

const NOTES_PER_USER = 50;

async function json(url: string, init: RequestInit & { body?: string } = {}): Promise<any> {
  const res = await fetch(url, { ...init, headers: { 'content-type': 'application/json', ...init.headers } });
  const body = await res.json();
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${url}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

export async function run(ctx: { adminUrl: string }): Promise<Array<Record<string, string | number>>> {
  const name = 'bench_notes_idp';
  const admin = new pg.Client({ connectionString: ctx.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  await ensureDatabase(ctx.adminUrl, name);

  const keys = {
    IDP_PUBLISHABLE_KEY: `sb_publishable_bench${randomBytes(12).toString('hex')}`,
    IDP_SECRET_KEY: `sb_secret_bench${randomBytes(12).toString('hex')}`,
  };
  const signingKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const idp = await startService('src/idp/server.ts', { ...keys, DATABASE_URL: withDatabase(ctx.adminUrl, name), IDP_SIGNING_KEY: signingKey });
  const notesEnv = { IDP_URL: idp.url, ...keys };
  const remote = await startService('src/notes/server.ts', { ...notesEnv, IDP_VERIFY: 'remote' });
  const local = await startService('src/notes/server.ts', { ...notesEnv, IDP_VERIFY: 'local' });
  const ceiling = await startCeiling('json');
  try {
    // One user with 50 notes, made through the notes service itself.
    const email = `bench-${randomBytes(4).toString('hex')}@example.com`;
    const password = 'bench-password-1234';
    await json(`${remote.url}/auth/register`, { method: 'POST', body: JSON.stringify({ email, password }) });
    const { access_token: token } = await json(`${remote.url}/auth/login`, { method: 'POST', body: JSON.stringify({ email, password }) });
    const bearer = { authorization: `Bearer ${token}` };
    for (let i = 0; i < NOTES_PER_USER; i++) {
      await json(`${remote.url}/notes`, { method: 'POST', headers: bearer, body: JSON.stringify({ title: `note ${i}`, body: 'x'.repeat(200) }) });
    }
    const listed = (await json(`${local.url}/notes`, { headers: bearer })) as unknown[];
    if (listed.length !== NOTES_PER_USER) throw new Error(`expected ${NOTES_PER_USER} notes, got ${listed.length}`);

    const base = { connections: 50, durationSeconds: 10, warmupSeconds: 2 };
    const ceilingRun = await load({ ...base, url: ceiling.url });
    const idpUser = await load({ ...base, url: `${idp.url}/auth/v1/user`, headers: { apikey: keys.IDP_SECRET_KEY, ...bearer } });
    // The exact request supabase-js sends for the list.
    const idpRest = await load({
      ...base,
      url: `${idp.url}/rest/v1/notes?select=*&order=created_at.desc%2Cid.desc`,
      headers: { apikey: keys.IDP_PUBLISHABLE_KEY, 'accept-profile': 'public', ...bearer },
    });
    const notesRemote = await load({ ...base, url: `${remote.url}/notes`, headers: bearer });
    const notesLocal = await load({ ...base, url: `${local.url}/notes`, headers: bearer });

    const row = (label: string, r: LoadResult) => ({
      run: label,
      'req/s': Math.round(r.rps),
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      'vs ceiling': `${(ratio(r.rps, ceilingRun.rps) * 100).toFixed(0)}%`,
      'vs idp /user': `${(ratio(r.rps, idpUser.rps) * 100).toFixed(0)}%`,
      // Anything but 200 means the figure is not of the path we meant to measure.
      statuses: Object.entries(r.statusCounts)
        .map(([s, n]) => `${s}×${n}`)
        .join(' '),
      errors: r.errors,
    });
    const share = ratio(notesRemote.rps, idpUser.rps);
    const bound = 1 / (1 / idpUser.rps + 1 / idpRest.rps);
    console.log(
      `notes-remote / idp-user: ${(share * 100).toFixed(0)}% (target >= 50%); ` +
        `bound from the idp's two requests per call: ${Math.round(bound)} req/s = ${(ratio(bound, idpUser.rps) * 100).toFixed(0)}% of idp-user; ` +
        `notes-remote reaches ${(ratio(notesRemote.rps, bound) * 100).toFixed(0)}% of that bound`,
    );
    return [
      row('bare node:http JSON (ceiling)', ceilingRun),
      row('idp GET /auth/v1/user alone', idpUser),
      row(`idp GET /rest/v1/notes (${NOTES_PER_USER} notes) alone`, idpRest),
      row(`notes GET /notes (${NOTES_PER_USER} notes), IDP_VERIFY=remote`, notesRemote),
      row(`notes GET /notes (${NOTES_PER_USER} notes), IDP_VERIFY=local`, notesLocal),
    ];
  } finally {
    await ceiling.stop();
    await local.stop();
    await remote.stop();
    await idp.stop();
  }
}
