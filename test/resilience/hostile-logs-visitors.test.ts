// The shortener never keeps who visited: no raw client address and no User-Agent in its database
// or in anything it prints. A load run of every kind of request (redirects counted and refused,
// HEAD, stats, visits, creates up to and past the rate limit, pages, QR codes, the admin API, a
// request cut off by its deadline), from distinctive addresses and agents, once at the default
// log level (info) and once at debug. Addresses arrive both ways: through X-Forwarded-For from
// the trusted proxy (IPv4 and IPv6), and as the socket's own address of untrusted connections
// from 127.77.0.0/16. Then every line the process printed, start to shutdown, and every row of
// every shortener table are searched for each address (as sent and in its other spellings), each
// agent and the agents' distinctive tokens.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { after, test, type TestContext } from 'node:test';
import ipaddr from 'ipaddr.js';
import type { TestDatabase } from '../helpers/database.js';
import { type ServiceProcess, startServiceProcess } from '../helpers/process.js';
import { reportFigures } from './helpers/figures.js';
import { queryOnce } from './helpers/postgres.js';
import { ensureStopped } from './helpers/services.js';
import { shortenerDatabase } from '../helpers/shortener.js';

const REQUESTS = 2_000;
const CONCURRENCY = 24;
const ADMIN_KEY = `visitors-audit-${'k'.repeat(32)}`;
/** Every output line is kept: a truncated capture would hide exactly what is searched for. */
const KEEP_OUTPUT = 200_000_000;

const opened: Array<{ db: TestDatabase; proc?: ServiceProcess }> = [];

after(async () => {
  for (const { db, proc } of opened) {
    await ensureStopped(proc);
    await db.drop();
  }
});

interface Visitor {
  /** The address as the request carries it (header or socket). */
  ip: string;
  via: 'forwarded' | 'socket';
  agent: string;
  /** The agent's distinctive part, searched alone too. */
  token: string;
}

/** Distinct addresses and agents of this run, so no other text can look like one of them. */
function visitors(run: string, count: number): Visitor[] {
  return Array.from({ length: count }, (_, i) => {
    const token = `VisitorCanary${run}x${i}`;
    const agent = [
      `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 ${token}`,
      `Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1 ${token}`,
      `Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots) ${token}`,
      `curl/8.4.0 ${token}`,
    ][i % 4]!;
    const kind = i % 3;
    const ip =
      kind === 0
        ? `198.18.${(i >> 8) & 255}.${i & 255}`
        : kind === 1
          ? `2001:db8:7a3f:${(i % 7).toString(16)}::${(0x1000 + i).toString(16)}`
          : `127.77.${(i >> 8) & 255}.${i & 255 || 1}`;
    return { ip, via: kind === 2 ? 'socket' : 'forwarded', agent, token };
  });
}

/** The spellings of an address a log line could carry: as sent, normalised, IPv4-mapped. */
function spellings(ip: string): string[] {
  const parsed = ipaddr.parse(ip);
  const forms = new Set([ip, parsed.toString()]);
  if (parsed.kind() === 'ipv6') {
    forms.add((parsed as ipaddr.IPv6).toNormalizedString());
  } else {
    forms.add((parsed as ipaddr.IPv4).toIPv4MappedAddress().toNormalizedString());
  }
  return [...forms];
}

interface Answer {
  status: number;
  text: string;
}

function request(
  port: number,
  visitor: Visitor,
  spec: { method: string; path: string; headers?: Record<string, string>; json?: unknown },
  agent: http.Agent,
): Promise<Answer | string> {
  const body = spec.json === undefined ? undefined : JSON.stringify(spec.json);
  const headers: Record<string, string> = { 'user-agent': visitor.agent, referer: `https://ref.example/${visitor.token}`, ...spec.headers };
  if (visitor.via === 'forwarded') headers['x-forwarded-for'] = visitor.ip;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: spec.method,
        path: spec.path,
        headers,
        // An untrusted connection from the visitor's own loopback address: the socket is the client.
        ...(visitor.via === 'socket' ? { localAddress: visitor.ip, agent: false } : { agent }),
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (err) => resolve(err.message));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve((err as NodeJS.ErrnoException).code ?? err.message));
    req.end(body);
  });
}

/** A request from a visitor's socket that never finishes its headers: the service answers 408 and logs it. */
function stalledRequest(port: number, localAddress: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress }, () => socket.write('GET /api/links HTTP/1.1\r\nHost: x\r\n'));
    let received = '';
    socket.on('data', (d) => (received += d.toString('latin1')));
    socket.on('close', () => resolve(received));
    socket.on('error', () => {});
    socket.setTimeout(15_000, () => socket.destroy());
  });
}

async function json(url: string, method: string, body: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(url, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  assert.ok(res.ok, `${method} ${url}: ${res.status}`);
  return res.json();
}

async function auditAt(level: 'info' | 'debug', t: TestContext): Promise<void> {
  const db = await shortenerDatabase();
  const entry: { db: TestDatabase; proc?: ServiceProcess } = { db };
  opened.push(entry);
  const proc = await startServiceProcess(
    'src/shortener/server.ts',
    {
      DATABASE_URL: db.url,
      REDIS_URL: '',
      TRUST_PROXY: '127.0.0.1',
      BASE_URL: 'https://sho.rt',
      NODE_OPTIONS: '',
      LOG_LEVEL: level,
      SHORTENER_ADMIN_KEY: ADMIN_KEY,
      HTTP_HEADERS_TIMEOUT_MS: '1000',
      HTTP_REQUEST_TIMEOUT_MS: '1000',
    },
    { keepOutput: KEEP_OUTPUT },
  );
  entry.proc = proc;

  const seedHeaders = { 'x-forwarded-for': '10.250.0.1' };
  const active = (await json(`${proc.url}/api/links`, 'POST', { url: 'https://example.com/active' }, seedHeaders)).data.code as string;
  const limited = (await json(`${proc.url}/api/links`, 'POST', { url: 'https://example.com/limited', max_visits: 5 }, seedHeaders)).data
    .code as string;
  const disabled = (await json(`${proc.url}/api/links`, 'POST', { url: 'https://example.com/disabled' }, seedHeaders)).data.code as string;
  await json(`${proc.url}/api/links/${disabled}`, 'PATCH', { disabled: true }, { authorization: `Bearer ${ADMIN_KEY}` });

  const run = randomBytes(4).toString('hex');
  const people = visitors(run, 300);
  // Some addresses send more than 10 creates: the rate limit answers them 429.
  const requests = (i: number): { method: string; path: string; headers?: Record<string, string>; json?: unknown } => {
    const roll = i % 40;
    if (roll < 22) return { method: 'GET', path: `/${active}` };
    if (roll < 24) return { method: 'HEAD', path: `/${active}` };
    if (roll < 26) return { method: 'GET', path: `/${i % 2 ? limited : disabled}` };
    if (roll < 27) return { method: 'GET', path: '/zzzzzz9' };
    if (roll < 28) return { method: 'GET', path: `/api/links/${active}` };
    if (roll < 29)
      return {
        method: 'GET',
        path: `/api/links/${active}/visits?interval=hour&from=${new Date(Date.now() - 86_400_000).toISOString()}`,
        headers: { authorization: `Bearer ${ADMIN_KEY}` },
      };
    if (roll < 30) return { method: 'GET', path: `/api/links/${active}/visits?interval=week` };
    if (roll < 34) return { method: 'POST', path: '/api/links', json: { url: `https://example.com/created/${i}` } };
    if (roll < 35) return { method: 'GET', path: `/stats/${active}` };
    if (roll < 36) return { method: 'GET', path: '/' };
    if (roll < 37) return { method: 'GET', path: `/api/links/${active}/qr` };
    if (roll < 38) return { method: 'GET', path: '/api/links?q=example', headers: { authorization: `Bearer ${ADMIN_KEY}` } };
    if (roll < 39) return { method: 'GET', path: '/api/links', headers: { authorization: 'Bearer wrong-key' } };
    return { method: 'POST', path: '/api/links', json: { url: 'ftp://example.com/refused' } };
  };

  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const statuses: Record<string, number> = {};
  let next = 0;
  const worker = async () => {
    while (next < REQUESTS) {
      const i = next++;
      // Creates come mostly from a few addresses, so those pass the limit of 10 a minute.
      const spec = requests(i);
      const visitor = spec.method === 'POST' ? people[i % 12]! : people[i % people.length]!;
      const answer = await request(proc.port, visitor, spec, agent);
      const key = typeof answer === 'string' ? answer : String(answer.status);
      statuses[key] = (statuses[key] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  agent.destroy();
  const stalledFrom = people.find((p) => p.via === 'socket')!.ip;
  const stalled = await stalledRequest(proc.port, stalledFrom);

  const clicks = await queryOnce<{ clicks: number }>(db.url, 'SELECT coalesce(sum(clicks), 0)::int AS clicks FROM links');
  const stored = await queryOnce<{ visits: number }>(db.url, 'SELECT coalesce(sum(visits), 0)::int AS visits FROM visit_counts');
  const tables = await queryOnce<{ table_name: string }>(
    db.url,
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'schema_migrations'",
  );
  let dump = '';
  for (const { table_name: table } of tables) {
    dump += (await queryOnce<{ row: string }>(db.url, `SELECT t::text AS row FROM "${table}" AS t`)).map((r) => r.row).join('\n');
  }

  assert.equal(await proc.stop(), 0, 'the service shuts down cleanly (its shutdown lines are searched too)');
  const output = proc.output();
  const lines = output.split('\n').filter((line) => line.length > 0);
  const requestLines = lines.filter((line) => line.includes('"request completed"')).length;

  const needles = new Map<string, string>();
  for (const p of people) {
    for (const form of spellings(p.ip)) needles.set(form, `address ${p.ip}`);
    needles.set(p.agent, `agent of ${p.ip}`);
    needles.set(p.token, `agent token of ${p.ip}`);
  }
  const inLogs = [...needles].filter(([needle]) => output.includes(needle)).map(([needle, what]) => `${what}: ${needle}`);
  const inDatabase = [...needles].filter(([needle]) => dump.includes(needle)).map(([needle, what]) => `${what}: ${needle}`);

  reportFigures(t, `visitor privacy after a load run, LOG_LEVEL=${level}`, {
    requests: REQUESTS,
    statuses,
    clicks: clicks[0]!.clicks,
    visits: stored[0]!.visits,
    printedLines: lines.length,
    requestLines,
    needles: needles.size,
    foundInLogs: inLogs.length,
    foundInDatabase: inDatabase.length,
  });

  // The run did what it should, so the search covers every kind of answer and line.
  for (const status of ['200', '201', '302', '400', '401', '404', '410', '429'])
    assert.ok((statuses[status] ?? 0) > 0, `no ${status} in the run: ${JSON.stringify(statuses)}`);
  assert.deepEqual(
    Object.keys(statuses).filter((s) => !/^[2-4]\d\d$/.test(s)),
    [],
    `every request answered, none with a 5xx: ${JSON.stringify(statuses)}`,
  );
  assert.match(stalled, /^HTTP\/1\.1 408/, 'the stalled request got its 408');
  assert.ok(clicks[0]!.clicks > 0);
  assert.equal(stored[0]!.visits, clicks[0]!.clicks, 'visits == clicks');
  // Each request left its lines: the search had something to search.
  assert.ok(requestLines >= REQUESTS, `${requestLines} request lines for ${REQUESTS} requests`);
  assert.match(output, /request not complete by its deadline/, 'the 408 was logged');
  assert.ok(dump.includes('ref.example'), 'the database dump holds the visits (referrer hosts)');
  // The scanner itself: a needle planted in a copy of the output is found.
  assert.ok(`${output}${people[0]!.ip}`.includes(people[0]!.ip));

  assert.deepEqual(inLogs.slice(0, 10), [], `LOG_LEVEL=${level}: ${inLogs.length} client addresses or agents in the logs`);
  assert.deepEqual(inDatabase.slice(0, 10), [], `${inDatabase.length} client addresses or agents in the database`);
}

test('LOG_LEVEL=info (the default): after a load run, no client address or User-Agent in the logs or the database', async (t) => {
  await auditAt('info', t);
});

test('LOG_LEVEL=debug: after a load run, no client address or User-Agent in the logs or the database', async (t) => {
  await auditAt('debug', t);
});
