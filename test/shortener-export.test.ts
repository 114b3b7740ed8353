import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createPool } from '../src/kit/db.js';
import { csvCell } from '../src/shortener/csv.js';
import { EXPORT_PAGE_SIZE } from '../src/shortener/routes/export-links.js';
import { uniqueIp } from './helpers/client-ips.js';
import { bearer } from './helpers/http.js';
import { assertEnvelope, startShortener, TEST_ADMIN_AUTH, TEST_ADMIN_KEY, issueApiKey, sharedShortener } from './helpers/shortener.js';

// GET /api/links/export and GET /api/links/:code/visits/export: who may download
// what, CSV as RFC 4180 with the CSV-injection defence, and a list that reads
// back into the links it came from.

const ctx = sharedShortener({ env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } });
interface Created {
  code: string;
  manage_token: string;
}

async function bulkCreate(items: object[], headers: Record<string, string>): Promise<Created[]> {
  const res = await ctx.app.inject({ method: 'POST', url: '/api/links/bulk', payload: items, headers, remoteAddress: uniqueIp() });
  assert.equal(res.statusCode, 200, res.body);
  const results = (res.json() as { data: { results: Array<{ status: number; message: string; data: Created }> } }).data.results;
  for (const r of results) assert.equal(r.status, 201, r.message);
  return results.map((r) => r.data);
}

/** RFC 4180 records of a text (quoted fields with doubled quotes and line breaks inside). */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let field = '';
  let record: string[] = [];
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      record.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      record.push(field);
      records.push(record);
      record = [];
      field = '';
      i++;
    } else field += c;
  }
  assert.equal(field, '', 'the file ends with CRLF');
  return records;
}

/** What a cell held before the injection defence: one leading apostrophe dropped. */
const readCell = (cell: string) => (cell.startsWith("'") ? cell.slice(1) : cell);

/** The CSV as objects by header, cells read back. */
function csvObjects(text: string): Array<Record<string, string>> {
  const [header, ...rows] = parseCsv(text);
  return rows.map((row) => Object.fromEntries(header!.map((name, i) => [name, readCell(row[i]!)])));
}

async function exportLinks(headers: Record<string, string>, format = 'csv') {
  return ctx.app.inject({ method: 'GET', url: `/api/links/export?format=${format}`, headers });
}

describe('CSV cells', () => {
  it('quote commas, double quotes and line breaks (RFC 4180) and defuse formulas with a leading apostrophe', () => {
    assert.equal(csvCell('plain'), 'plain');
    assert.equal(csvCell('a,b'), '"a,b"');
    assert.equal(csvCell('say "hi"'), '"say ""hi"""');
    assert.equal(csvCell('two\nlines'), '"two\nlines"');
    assert.equal(csvCell('=1+2'), "'=1+2");
    assert.equal(csvCell('+1'), "'+1");
    assert.equal(csvCell('-1'), "'-1");
    assert.equal(csvCell('@SUM(A1)'), "'@SUM(A1)");
    assert.equal(csvCell('\tx'), "'\tx");
    assert.equal(csvCell("'already"), "''already");
    assert.equal(csvCell('=HYPERLINK("http://x","y")'), `"'=HYPERLINK(""http://x"",""y"")"`);
    assert.equal(csvCell(null), '');
    assert.equal(csvCell(12), '12');
    assert.equal(csvCell(false), 'false');
  });
});

describe('link export', () => {
  it('an author key exports its own links only; manager and admin keys every link; a token or nothing is refused', async () => {
    const alice = await issueApiKey(ctx.app, 'export-alice', 'author');
    const bob = await issueApiKey(ctx.app, 'export-bob', 'author');
    const manager = await issueApiKey(ctx.app, 'export-manager', 'manager');
    const aliceLinks = await bulkCreate(
      [{ url: 'https://example.com/alice/1' }, { url: 'https://example.com/alice/2' }],
      bearer(alice.key),
    );
    const bobLinks = await bulkCreate([{ url: 'https://example.com/bob/1' }], bearer(bob.key));
    const codes = async (headers: Record<string, string>) => {
      const res = await exportLinks(headers);
      assert.equal(res.statusCode, 200, res.body);
      return csvObjects(res.body).map((r) => r.code!);
    };
    assert.deepEqual((await codes(bearer(alice.key))).sort(), aliceLinks.map((l) => l.code).sort());
    assert.deepEqual(await codes(bearer(bob.key)), [bobLinks[0]!.code]);
    for (const headers of [bearer(manager.key), TEST_ADMIN_AUTH]) {
      const all = await codes(headers);
      for (const link of [...aliceLinks, ...bobLinks]) assert.ok(all.includes(link.code));
    }
    for (const headers of [{}, bearer(aliceLinks[0]!.manage_token), bearer(`sk_${'x'.repeat(43)}`)]) {
      const res = await exportLinks(headers);
      assert.equal(res.statusCode, 401);
      assertEnvelope(res.json(), 401, 'Unauthorized');
    }
  });

  it('answers an attachment, CSV with a header row or JSON; another format is a 400', async () => {
    const csv = await exportLinks(TEST_ADMIN_AUTH);
    assert.equal(csv.headers['content-type'], 'text/csv; charset=utf-8');
    assert.equal(csv.headers['content-disposition'], 'attachment; filename="links.csv"');
    assert.equal(csv.headers['cache-control'], 'no-store');
    assert.ok(
      csv.body.startsWith('code,short_url,original_url,clicks,created_at,expires_at,max_visits,disabled,title,tags,password_protected\r\n'),
    );
    const json = await exportLinks(TEST_ADMIN_AUTH, 'json');
    assert.equal(json.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(json.headers['content-disposition'], 'attachment; filename="links.json"');
    assert.ok(Array.isArray(json.json()));
    const plain = await ctx.app.inject({ method: 'GET', url: '/api/links/export', headers: TEST_ADMIN_AUTH });
    assert.equal(plain.headers['content-type'], 'text/csv; charset=utf-8');
    const bad = await exportLinks(TEST_ADMIN_AUTH, 'xml');
    assert.equal(bad.statusCode, 400);
    assertEnvelope(bad.json(), 400, 'Bad Request');
  });

  it('quotes and defuses cells, and an exported list reads back into the same links, and creates them again', async () => {
    const author = await issueApiKey(ctx.app, 'export-roundtrip', 'author');
    const items = [
      { url: 'https://example.com/formula', title: '=HYPERLINK("http://evil.example","click")', tags: ['finance', 'q1'] },
      { url: 'https://example.com/quoted?a=1,2', title: 'a, b "c"\r\nsecond line' },
      { url: 'https://example.com/apostrophe', title: "'=not a formula", max_visits: 5, expires_at: '2099-05-01T10:00:00Z' },
      { url: 'https://example.com/plus', title: '+SUM(1)', alias: '-dash-code' },
      { url: 'https://example.com/at', title: '@cmd' },
    ];
    await bulkCreate(items, bearer(author.key));
    const csv = await exportLinks(bearer(author.key));
    assert.ok(csv.body.includes(`"'=HYPERLINK(""http://evil.example"",""click"")"`), csv.body);
    assert.ok(csv.body.includes(`"a, b ""c""\r\nsecond line"`));
    assert.ok(csv.body.includes(`''=not a formula`));
    assert.ok(csv.body.includes(`'-dash-code,`));
    assert.ok(csv.body.includes(`,'+SUM(1),`));
    assert.ok(csv.body.includes(`,'@cmd,`));
    const json = (await exportLinks(bearer(author.key), 'json')).json() as Array<Record<string, unknown>>;
    const rows = csvObjects(csv.body);
    assert.equal(rows.length, items.length);
    // The CSV says what the JSON says, cell for cell.
    assert.deepEqual(
      rows,
      json.map((link) =>
        Object.fromEntries(Object.entries(link).map(([k, v]) => [k, v === null ? '' : Array.isArray(v) ? v.join(' ') : String(v)])),
      ),
    );
    const byUrl = new Map(json.map((link) => [link.original_url, link]));
    for (const item of items) {
      const link = byUrl.get(item.url)!;
      assert.equal(link.title, item.title);
      assert.deepEqual(link.tags, item.tags ?? []);
      assert.equal(link.max_visits, item.max_visits ?? null);
      assert.equal(link.expires_at, item.expires_at ? new Date(item.expires_at).toISOString() : null);
    }
    // Read back from the CSV, the links are created again as they were.
    const again = await issueApiKey(ctx.app, 'export-roundtrip-again', 'author');
    const recreated = rows.map((row) => ({
      url: row.original_url!,
      ...(row.title !== '' && { title: row.title }),
      ...(row.tags !== '' && { tags: row.tags!.split(' ') }),
      ...(row.max_visits !== '' && { max_visits: Number(row.max_visits) }),
      ...(row.expires_at !== '' && { expires_at: row.expires_at }),
    }));
    await bulkCreate(recreated, bearer(again.key));
    const copy = csvObjects((await exportLinks(bearer(again.key))).body);
    const fields = (r: Record<string, string>) => [r.original_url, r.title, r.tags, r.max_visits, r.expires_at, r.disabled, r.clicks];
    assert.deepEqual(copy.map(fields).sort(), rows.map(fields).sort());
  });

  it(`pages through more than ${EXPORT_PAGE_SIZE} links created in one instant, each once, newest first`, async () => {
    const author = await issueApiKey(ctx.app, 'export-many', 'author');
    const created = await bulkCreate(
      Array.from({ length: EXPORT_PAGE_SIZE + 7 }, (_, i) => ({ url: `https://example.com/many/${i}` })),
      bearer(author.key),
    );
    const res = await exportLinks(bearer(author.key), 'json');
    const codes = (res.json() as Array<{ code: string }>).map((l) => l.code);
    assert.equal(codes.length, created.length);
    // One INSERT gives them one created_at: the order is then by code, descending.
    assert.deepEqual(
      codes,
      created.map((l) => l.code).sort((a, b) => (a < b ? 1 : -1)),
    );
    const csvRows = csvObjects((await exportLinks(bearer(author.key))).body);
    assert.equal(csvRows.length, created.length);
  });
});

describe('visit export', () => {
  it("the link's manager downloads its hourly rows; another author or link's token is a 403, none a 401", async () => {
    const alice = await issueApiKey(ctx.app, 'visits-alice', 'author');
    const bob = await issueApiKey(ctx.app, 'visits-bob', 'author');
    const [link, other] = await bulkCreate(
      [{ url: 'https://example.com/visited' }, { url: 'https://example.com/other' }],
      bearer(alice.key),
    );
    for (const headers of [
      {
        'user-agent': 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36',
        referer: 'https://news.example/a',
      },
      {
        'user-agent': 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36',
        referer: 'https://news.example/b',
      },
      { 'user-agent': 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)' },
    ]) {
      const res = await ctx.app.inject({ method: 'GET', url: `/${link!.code}`, headers, remoteAddress: uniqueIp() });
      assert.equal(res.statusCode, 302);
    }
    const url = (format: string) => `/api/links/${link!.code}/visits/export?format=${format}`;
    for (const headers of [bearer(alice.key), bearer(link!.manage_token), TEST_ADMIN_AUTH]) {
      const res = await ctx.app.inject({ method: 'GET', url: url('csv'), headers });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.headers['content-disposition'], `attachment; filename="visits-${link!.code}.csv"`);
      const rows = csvObjects(res.body);
      assert.ok(res.body.startsWith('hour,class,referrer,browser,os,device,visits,country\r\n'));
      assert.equal(
        rows.reduce((sum, r) => sum + Number(r.visits), 0),
        3,
      );
      assert.deepEqual(
        rows.find((r) => r.referrer === 'news.example'),
        {
          hour: rows[0]!.hour,
          class: 'human',
          referrer: 'news.example',
          browser: 'Chrome',
          os: 'Windows',
          device: 'desktop',
          visits: '2',
          // Test clients come from private addresses: no country.
          country: '',
        },
      );
    }
    const json = await ctx.app.inject({ method: 'GET', url: url('json'), headers: bearer(alice.key) });
    assert.equal(
      (json.json() as Array<{ visits: number }>).reduce((sum, r) => sum + r.visits, 0),
      3,
    );
    for (const headers of [bearer(bob.key), bearer(other!.manage_token)]) {
      const res = await ctx.app.inject({ method: 'GET', url: url('csv'), headers });
      assert.equal(res.statusCode, 403);
      assertEnvelope(res.json(), 403, 'Forbidden');
    }
    const none = await ctx.app.inject({ method: 'GET', url: url('csv') });
    assert.equal(none.statusCode, 401);
    const unknown = await ctx.app.inject({ method: 'GET', url: '/api/links/zzzzzz9/visits/export', headers: TEST_ADMIN_AUTH });
    assert.equal(unknown.statusCode, 404);
    const { rows } = await ctx.pool.query('SELECT 1 FROM links WHERE code = $1', [link!.code]);
    assert.equal(rows.length, 1);
  });

  it('an alias cannot be `export` or `bulk`, which would shadow these routes', async () => {
    for (const alias of ['export', 'bulk']) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/api/links',
        payload: { url: 'https://example.com/shadow', alias },
        remoteAddress: uniqueIp(),
      });
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().message, `alias "${alias}" is reserved: it names a page of this service`);
    }
  });
});

describe('export failures', () => {
  it('a database that is gone is a 503 before any byte of the file, not a cut download', async () => {
    const deadPool = createPool('postgres://postgres@127.0.0.1:1/none', { connectionTimeoutMillis: 500 });
    const dead = await startShortener({ pool: deadPool, env: { SHORTENER_ADMIN_KEY: TEST_ADMIN_KEY } });
    try {
      const res = await dead.app.inject({ method: 'GET', url: '/api/links/export?format=csv', headers: TEST_ADMIN_AUTH });
      assert.equal(res.statusCode, 503);
      assert.equal(res.headers['content-disposition'], undefined);
      assertEnvelope(res.json(), 503, 'Service Unavailable');
      const bulk = await dead.app.inject({
        method: 'POST',
        url: '/api/links/bulk',
        payload: [{ url: 'https://example.com/dead' }],
        headers: TEST_ADMIN_AUTH,
        remoteAddress: uniqueIp(),
      });
      assert.equal(bulk.statusCode, 503);
      assertEnvelope(bulk.json(), 503, 'Service Unavailable');
    } finally {
      await dead.close();
      await deadPool.end();
    }
  });
});
