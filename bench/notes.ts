import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { systemClock } from '../src/kit/clock.js';
import { HttpError } from '../src/kit/http/errors.js';
import type { TokenVerificationMode } from '../src/notes/config.js';
import { asCaller, createIdpClients } from '../src/notes/idp-clients.js';
import { localTokenVerifier } from '../src/notes/token-verifier.js';
import {
  type LoadOptions,
  type LoadResult,
  alternate,
  contextRow,
  cpuDuring,
  cpuPerRequest,
  databaseBackendPids,
  defaultGenerator,
  freshBenchDatabase,
  load,
  measure,
  ratio,
  referenceConfig,
  referenceRow,
  startCeiling,
  startReference,
  startService,
} from './lib.js';

// GET /notes for one user with 50 notes, 50 connections, 10 s: notes with
// remote token checks (one idp request per call) and with IDP_VERIFY=local,
// beside the idp's own GET /auth/v1/user (what a remote check costs by itself),
// the idp's REST read of the same 50 notes (what the store call costs by
// itself) and a bare node:http JSON server, all measured in this run.
//
// A remote GET /notes is one /auth/v1/user plus one REST read at the idp, so
// even a notes service costing nothing could not pass
// 1 / (1/user + 1/rest) requests/s; that bound is printed beside the ratio.
// Then PATCH /notes/:id and a searched page (?q=), with their p99. Beside each
// rate: the CPU per request of the processes that served it (notes, the idp,
// PostgreSQL's backends of the idp's database), read from /proc.

//
// GET /notes is also measured beside a minimal node:http reference that makes the same two idp
// calls with the same client notes uses (supabase-js from createIdpClients, with its bounded
// fetch): the token check (auth.getUser with the secret-key client), then the REST read (the
// publishable-key client, the caller's token on the query, retries off), and answers the rows
// with their count. With IDP_VERIFY=local, beside a second reference that checks the token with
// notes' own local verifier (localTokenVerifier: jose against the idp's JWKS, ES256/RS256 only,
// aud, exp and sub, low-s, verified tokens remembered for a minute) and then makes the same one
// REST read. Each against the same idp, in alternating rounds, medians; the CPU beside each is
// the server's, the idp's and PostgreSQL's per request.

const NOTES_PER_USER = 50;
const REFERENCE_FLAG = '--notes-reference';
const LOCAL_REFERENCE_FLAG = '--notes-local-reference';

interface ReferenceConfig {
  idpUrl: string;
  publishableKey: string;
  secretKey: string;
}

const IDP_TIMEOUT_MS = 5000;

/** `verify` as notes' IDP_VERIFY: remote asks the idp for every request, local checks the signature here. */
async function serveReference(config: ReferenceConfig & { port: number }, verify: TokenVerificationMode): Promise<void> {
  const clients = createIdpClients({
    IDP_URL: config.idpUrl,
    IDP_SECRET_KEY: config.secretKey,
    IDP_PUBLISHABLE_KEY: config.publishableKey,
    IDP_TIMEOUT_MS,
    IDP_FORWARDED_SECRET: undefined,
  });
  // Notes' own verifier, as notes builds it in local mode (its request metrics left out, so
  // jose fetches the JWKS with the global fetch that notes' metrics wrap).
  const verifyLocally =
    verify === 'local'
      ? localTokenVerifier({ idpUrl: config.idpUrl, publishableKey: config.publishableKey, timeoutMs: IDP_TIMEOUT_MS, clock: systemClock })
      : undefined;
  const fail = (res: http.ServerResponse, status: number, message: string) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ message }));
  };
  http
    .createServer(async (req, res) => {
      try {
        const [scheme, token, ...rest] = (req.headers.authorization ?? '').split(' ');
        if (req.url !== '/notes' || scheme?.toLowerCase() !== 'bearer' || !token || rest.length > 0) {
          return fail(res, 401, 'Missing bearer token');
        }
        if (!verifyLocally) {
          const { data, error } = await clients.privileged.auth.getUser(token);
          if (error || !data.user) return fail(res, 401, 'Invalid or expired token');
        } else {
          try {
            await verifyLocally(token);
          } catch (err) {
            // A refused token is a 401 with notes' message; keys out of reach fall through to 503.
            if (err instanceof HttpError) return fail(res, err.statusCode, err.message);
            throw err;
          }
        }
        const query = clients.data.from('notes').select('*').order('created_at', { ascending: false }).order('id', { ascending: false });
        const { data: notes, error: readError } = await asCaller(query, token).retry(false);
        if (readError) return fail(res, 500, 'store failed');
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'x-total-count': String(notes.length) });
        res.end(JSON.stringify(notes));
      } catch {
        fail(res, 503, 'identity provider unavailable');
      }
    })
    .listen(config.port, '127.0.0.1');
}

if (process.argv.includes(REFERENCE_FLAG)) await serveReference(referenceConfig<ReferenceConfig>(), 'remote');
if (process.argv.includes(LOCAL_REFERENCE_FLAG)) await serveReference(referenceConfig<ReferenceConfig>(), 'local');

async function json(url: string, init: RequestInit & { body?: string } = {}): Promise<any> {
  const res = await fetch(url, { ...init, headers: { 'content-type': 'application/json', ...init.headers } });
  const body = await res.json();
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${url}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

export async function run(ctx: { adminUrl: string }): Promise<Record<string, Array<Record<string, string | number>>>> {
  const databaseUrl = await freshBenchDatabase(ctx.adminUrl, 'bench_notes_idp');

  const keys = {
    IDP_PUBLISHABLE_KEY: `sb_publishable_bench${randomBytes(12).toString('hex')}`,
    IDP_SECRET_KEY: `sb_secret_bench${randomBytes(12).toString('hex')}`,
  };
  const signingKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  // Sign-ups confirmed at once, as under npm start: the bench's user signs in without a mail.
  const idp = await startService('src/idp/server.ts', {
    ...keys,
    DATABASE_URL: databaseUrl,
    IDP_SIGNING_KEY: signingKey,
    IDP_AUTOCONFIRM: 'true',
  });
  const notesEnv = { IDP_URL: idp.url, ...keys };
  const remote = await startService('src/notes/server.ts', { ...notesEnv, IDP_VERIFY: 'remote' });
  const local = await startService('src/notes/server.ts', { ...notesEnv, IDP_VERIFY: 'local' });
  // Notes at the production default log level (info: one access line a request), remote mode, beside
  // the same reference (the idp they both call stays at warn), so notes' logging is read off the same run.
  const remoteAtInfo = await startService('src/notes/server.ts', { ...notesEnv, IDP_VERIFY: 'remote', LOG_LEVEL: 'info' });
  const ceiling = await startCeiling('json');
  const startedReferences: Array<Awaited<ReturnType<typeof startReference>>> = [];
  try {
    // One user with 50 notes, made through the notes service itself.
    const email = `bench-${randomBytes(4).toString('hex')}@example.com`;
    const password = 'bench-password-1234';
    await json(`${remote.url}/auth/register`, { method: 'POST', body: JSON.stringify({ email, password }) });
    const { access_token: token } = await json(`${remote.url}/auth/login`, { method: 'POST', body: JSON.stringify({ email, password }) });
    const bearer = { authorization: `Bearer ${token}` };
    for (let i = 0; i < NOTES_PER_USER; i++) {
      await json(`${remote.url}/notes`, {
        method: 'POST',
        headers: bearer,
        body: JSON.stringify({ title: `note ${i}`, body: 'x'.repeat(200) }),
      });
    }
    const listed = (await json(`${local.url}/notes`, { headers: bearer })) as unknown[];
    if (listed.length !== NOTES_PER_USER) throw new Error(`expected ${NOTES_PER_USER} notes, got ${listed.length}`);

    const generator = defaultGenerator();
    console.log(`notes: load generator ${generator}`);
    const seconds = Number(process.env.BENCH_SECONDS ?? 10);
    const base = { connections: 50, durationSeconds: seconds, generator };
    const backends = () => databaseBackendPids(ctx.adminUrl, 'bench_notes_idp');
    type Measured = { r: LoadResult; cpu: ReturnType<typeof cpuPerRequest> };
    const measured = async (opts: LoadOptions, pids: number[], db?: () => Promise<number[]>): Promise<Measured> => {
      // The warm-up outside the CPU window: only the measured run's requests are counted.
      await load({ ...opts, durationSeconds: 2 });
      const m = await cpuDuring(() => load(opts), pids, db);
      return { r: m.result, cpu: cpuPerRequest(m, m.result.requests) };
    };
    const ceilingRun = await measured({ ...base, url: ceiling.url }, [ceiling.pid]);
    const idpUser = await measured(
      { ...base, url: `${idp.url}/auth/v1/user`, headers: { apikey: keys.IDP_SECRET_KEY, ...bearer } },
      [idp.pid],
      backends,
    );
    // The exact request supabase-js sends for the list.
    const idpRest = await measured(
      {
        ...base,
        url: `${idp.url}/rest/v1/notes?select=*&order=created_at.desc%2Cid.desc`,
        headers: { apikey: keys.IDP_PUBLISHABLE_KEY, 'accept-profile': 'public', ...bearer },
      },
      [idp.pid],
      backends,
    );
    const notesRemote = await measured({ ...base, url: `${remote.url}/notes`, headers: bearer }, [remote.pid, idp.pid], backends);
    const notesLocal = await measured({ ...base, url: `${local.url}/notes`, headers: bearer }, [local.pid, idp.pid], backends);
    // One note edited over and over (a body that changes nothing in size), and a search that
    // matches 11 of the 50 (note 1, note 10 … note 19), one page of 10 with its exact count.
    const noteId = (listed[0] as { id: number }).id;
    const patch = await measured(
      {
        ...base,
        url: `${remote.url}/notes/${noteId}`,
        method: 'PATCH',
        headers: { ...bearer, 'content-type': 'application/json' },
        body: JSON.stringify({ body: 'y'.repeat(200) }),
      },
      [remote.pid, idp.pid],
      backends,
    );
    const search = await measured(
      { ...base, url: `${remote.url}/notes?q=note%201&limit=10`, headers: bearer },
      [remote.pid, idp.pid],
      backends,
    );

    const µs = (n: number | undefined) => (n === undefined ? 'n/a' : n.toFixed(0));
    // Figures only: the targets are those of the paths against their references (the table below).
    const row = (label: string, m: Measured) => ({
      run: label,
      'req/s': Math.round(m.r.rps),
      'p50 ms': m.r.p50,
      'p99 ms': m.r.p99,
      'vs ceiling': `${(ratio(m.r.rps, ceilingRun.r.rps) * 100).toFixed(0)}%`,
      'vs idp /user': `${(ratio(m.r.rps, idpUser.r.rps) * 100).toFixed(0)}%`,
      // Services' CPU (notes + idp where both serve it) + PostgreSQL's, per request.
      'CPU µs/req':
        m.cpu.total === undefined
          ? 'n/a'
          : `${µs(m.cpu.service)} + ${µs(m.cpu.database ?? 0)} = ${(m.cpu.total / (ceilingRun.cpu.service ?? 1)).toFixed(1)}x bare`,
      // Anything but 200 means the figure is not of the path we meant to measure.
      statuses: Object.entries(m.r.statusCounts)
        .map(([s, n]) => `${s}×${n}`)
        .join(' '),
      errors: m.r.errors,
    });
    // GET /notes against its reference in each mode: the answers compared first (status, count,
    // body), then alternating rounds of the reference and the notes service of that mode.
    const againstReference = async (flag: string, service: { url: string; pid: number }) => {
      const started = await startReference(fileURLToPath(import.meta.url), flag, {
        idpUrl: idp.url,
        publishableKey: keys.IDP_PUBLISHABLE_KEY,
        secretKey: keys.IDP_SECRET_KEY,
      } satisfies ReferenceConfig);
      startedReferences.push(started);
      const lists = await Promise.all(
        [service, started].map((s) =>
          fetch(`${s.url}/notes`, { headers: bearer }).then(async (r) => [r.status, r.headers.get('x-total-count'), await r.json()]),
        ),
      );
      if (!isDeepStrictEqual(lists[0], lists[1])) throw new Error(`notes and the reference ${flag} answer GET /notes differently`);
      return alternate(
        () => measure({ ...base, url: `${started.url}/notes`, headers: bearer }, { server: started.pid, others: [idp.pid], backends }),
        () => measure({ ...base, url: `${service.url}/notes`, headers: bearer }, { server: service.pid, others: [idp.pid], backends }),
      );
    };
    const remoteRuns = await againstReference(REFERENCE_FLAG, remote);
    const localRuns = await againstReference(LOCAL_REFERENCE_FLAG, local);
    const remoteAtInfoRuns = await againstReference(REFERENCE_FLAG, remoteAtInfo);
    const references = [
      contextRow(`bare node:http JSON, no database (context), ${generator}`, [{ r: ceilingRun.r, server: ceilingRun.cpu.service }]),
      referenceRow(`GET /notes (${NOTES_PER_USER} notes), IDP_VERIFY=remote; CPU: server + idp + PostgreSQL`, remoteRuns),
      referenceRow(`GET /notes (${NOTES_PER_USER} notes), IDP_VERIFY=local; CPU: server + idp + PostgreSQL`, localRuns),
      referenceRow(
        `GET /notes (${NOTES_PER_USER} notes), IDP_VERIFY=remote, notes at LOG_LEVEL=info (the default; the rows above: warn)`,
        remoteAtInfoRuns,
      ),
    ];

    const bound = 1 / (1 / idpUser.r.rps + 1 / idpRest.r.rps);
    console.log(
      `notes-remote / idp-user: ${(ratio(notesRemote.r.rps, idpUser.r.rps) * 100).toFixed(0)}%; ` +
        `bound from the idp's two requests per call: ${Math.round(bound)} req/s = ${(ratio(bound, idpUser.r.rps) * 100).toFixed(0)}% of idp-user; ` +
        `notes-remote reaches ${(ratio(notesRemote.r.rps, bound) * 100).toFixed(0)}% of that bound`,
    );
    const figures = [
      row(`bare node:http JSON (ceiling), ${generator}`, ceilingRun),
      row('idp GET /auth/v1/user alone', idpUser),
      row(`idp GET /rest/v1/notes (${NOTES_PER_USER} notes) alone`, idpRest),
      row(`notes GET /notes (${NOTES_PER_USER} notes), IDP_VERIFY=remote`, notesRemote),
      row(`notes GET /notes (${NOTES_PER_USER} notes), IDP_VERIFY=local`, notesLocal),
      row('notes PATCH /notes/:id, remote', patch),
      row('notes GET /notes?q=note%201&limit=10, remote', search),
    ];
    return { figures, 'GET /notes against a node:http reference (medians)': references };
  } finally {
    for (const started of startedReferences) await started.stop();
    await ceiling.stop();
    await local.stop();
    await remote.stop();
    await remoteAtInfo.stop();
    await idp.stop();
  }
}
