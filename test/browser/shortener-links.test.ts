import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import {
  assertAccessible,
  assertAccessibleInDark,
  assertClean,
  assertNoSidewaysScroll,
  assertSameOrigin,
  browserSkip,
  screenshots,
  tabTo,
  useBrowser,
  watchedPage,
} from '../helpers/browser.js';
import { uniqueIp } from '../helpers/client-ips.js';
import { freePort } from '../helpers/ports.js';
import { startShortener, type RunningShortener } from '../helpers/shortener.js';
import { startTargetSite, type TargetSite } from '../helpers/target-site.js';

// The "My links" page (/links) in a real Chromium against the real service and
// PostgreSQL: an API key issued by the admin through the API, its links listed,
// filtered, searched, edited (and the redirect following the edit), one created,
// a CSV imported through the bulk create, and the exports downloaded.

const ADMIN_KEY = 'browser-test-admin-key-0123456789abcdef';
const ADMIN = { authorization: `Bearer ${ADMIN_KEY}` };

interface LinkData {
  code: string;
  original_url: string;
  title: string | null;
  tags: string[];
  max_visits: number | null;
}

describe('the My links page in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let shortener: RunningShortener;
  let origin: string;
  let target: TargetSite;
  let context: BrowserContext;

  before(async () => {
    target = await startTargetSite('Target page', 'Target');
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    shortener = await startShortener({ listen: true, port, env: { BASE_URL: origin, SHORTENER_ADMIN_KEY: ADMIN_KEY } });
    context = await browser.newContext({ acceptDownloads: true });
  });

  after(async () => {
    await shortener?.close();
    await target?.close();
  });

  /** The admin issues a key through the API, as the page tells a person to ask for. */
  const issueKey = async (name: string, role: 'author' | 'manager'): Promise<string> => {
    const res = await shortener.app.inject({ method: 'POST', url: '/api/admin/keys', headers: ADMIN, payload: { name, role } });
    assert.equal(res.statusCode, 201);
    return (res.json() as { data: { key: string } }).data.key;
  };

  const bulk = async (key: string, items: object[]) => {
    const res = await shortener.app.inject({
      method: 'POST',
      url: '/api/links/bulk',
      headers: { authorization: `Bearer ${key}` },
      payload: items,
      remoteAddress: uniqueIp(),
    });
    assert.equal(res.statusCode, 200);
    const { created } = (res.json() as { data: { created: number } }).data;
    assert.equal(created, items.length);
  };

  /** Every link of a key, through the API. */
  const linksOf = async (key: string): Promise<LinkData[]> => {
    const res = await shortener.app.inject({ method: 'GET', url: '/api/links?per_page=1000', headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.statusCode, 200);
    return (res.json() as { data: LinkData[] }).data;
  };

  const codesShown = (page: Page) =>
    page.locator('#links-table tbody tr').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.code ?? '').sort());

  const signIn = async (page: Page, key: string) => {
    await page.getByLabel('API key', { exact: true }).fill(key);
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.locator('#workspace').waitFor({ state: 'visible' });
  };

  const downloaded = async (page: Page, click: () => Promise<void>): Promise<{ name: string; text: string }> => {
    const [download] = await Promise.all([page.waitForEvent('download'), click()]);
    const file = await download.path();
    return { name: download.suggestedFilename(), text: await readFile(file, 'utf8') };
  };

  it('lists the key’s links, filters by tag and search (in the address), edits a destination the redirect then follows, creates one', async () => {
    const key = await issueKey('Marketing', 'author');
    const other = await issueKey('Sales', 'author');
    await bulk(key, [
      { url: `${target.origin}/spring`, alias: 'spring-sale', title: 'Spring sale', tags: ['spring', 'sale'] },
      { url: `${target.origin}/news`, title: 'Monthly newsletter', tags: ['news'] },
      { url: `${target.origin}/about`, title: 'About us' },
    ]);
    await bulk(other, [{ url: `${target.origin}/not-mine`, alias: 'not-mine', tags: ['spring'] }]);

    const { page, w } = await watchedPage(context);
    const res = await page.goto(`${origin}/links`);
    assert.equal(res?.status(), 200);
    await assertAccessible(page, 'my links key form');
    // A key of the wrong shape is told without a request; an unknown one after the API refuses it.
    await page.getByLabel('API key', { exact: true }).fill('not a key');
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.locator('#key-error').filter({ hasText: 'starts with sk_' }).waitFor();
    await page.getByLabel('API key', { exact: true }).fill(`sk_${'x'.repeat(43)}`);
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.locator('#key-error').filter({ hasText: 'was not accepted' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('shortener-api-key')), null);
    await screenshots(page, 'shortener-links-key');

    await signIn(page, key);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('shortener-api-key')), key);
    assert.equal(await page.evaluate(() => document.cookie + localStorage.length), '0');
    // The focus goes to the list, which holds this author key's links only.
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'links-title');
    assert.deepEqual(await codesShown(page), (await linksOf(key)).map((l) => l.code).sort());
    assert.equal(await page.locator('#total').textContent(), '(3)');
    assert.equal(await page.locator('tr[data-code="spring-sale"] td[data-label="Title"]').textContent(), 'Spring sale');

    // A tag is a button: the list keeps that tag's links (not another key's), and the address says so.
    await page.getByRole('button', { name: 'Show links tagged spring' }).click();
    await page.locator('#total').filter({ hasText: 'tagged spring' }).waitFor();
    assert.deepEqual(await codesShown(page), ['spring-sale']);
    assert.equal(new URL(page.url()).search, '?tag=spring');
    // The address is a bookmark: opened again, the same view (the key stays in the tab, never in the address).
    await page.reload();
    await page.locator('#total').filter({ hasText: 'tagged spring' }).waitFor();
    assert.deepEqual(await codesShown(page), ['spring-sale']);
    assert.equal(await page.getByLabel('Tag', { exact: true }).inputValue(), 'spring');
    await page.getByRole('button', { name: 'Show all' }).click();
    await page
      .locator('#total')
      .filter({ hasText: /^\(3\)$/ })
      .waitFor();
    assert.equal(new URL(page.url()).search, '');
    // The search matches titles too.
    await page.getByLabel('Search by code, address or title').fill('newsletter');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('#total').filter({ hasText: '(1 matching)' }).waitFor();
    assert.equal(new URL(page.url()).searchParams.get('q'), 'newsletter');
    assert.equal(await page.locator('#links-table tbody tr td.url').textContent(), `${target.origin}/news`);
    // Back in the history: the earlier view.
    await page.goBack();
    await page
      .locator('#total')
      .filter({ hasText: /^\(3\)$/ })
      .waitFor();

    // Edit in a dialog: the focus goes into it, each refusal is said in words under its field.
    const editButton = page.getByRole('button', { name: 'Edit spring-sale' });
    await editButton.click();
    const dialog = page.locator('#edit-dialog');
    await dialog.waitFor({ state: 'visible' });
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'edit-url');
    await page.locator('#history-empty').waitFor({ state: 'visible' });
    await page.getByLabel('Destination', { exact: true }).fill('ftp://example.com/file');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('#edit-url-error').waitFor({ state: 'visible' });
    assert.equal(
      await page.locator('#edit-url-error').textContent(),
      'Only web addresses can be shortened: they start with http:// or https://.',
    );
    assert.equal(await page.getByLabel('Destination', { exact: true }).getAttribute('aria-invalid'), 'true');
    await page.getByLabel('Destination', { exact: true }).fill(`${target.origin}/summer`);
    await page.getByLabel('Tags', { exact: true }).fill('summer, -bad');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('#edit-tags-error').waitFor({ state: 'visible' });
    assert.match((await page.locator('#edit-tags-error').textContent()) ?? '', /^Tags are at most 10 words/);
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'edit-tags');
    assert.equal(await page.locator('#edit-url-error').isHidden(), true);
    // Nothing was changed by the refused saves.
    assert.equal((await linksOf(key)).find((l) => l.code === 'spring-sale')?.original_url, `${target.origin}/spring`);
    await page.getByLabel('Tags', { exact: true }).fill('Summer sale');
    await page.getByLabel('Maximum visits').fill('0');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('#edit-max-error').filter({ hasText: 'whole number from 1' }).waitFor();
    await page.getByLabel('Maximum visits').fill('100');
    await assertAccessible(page, 'my links edit dialog');
    await screenshots(page, 'shortener-links-edit');
    await page.getByRole('button', { name: 'Save' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.locator('#links-status').filter({ hasText: 'spring-sale saved.' }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'Edit spring-sale');
    const edited = (await linksOf(key)).find((l) => l.code === 'spring-sale');
    assert.deepEqual(
      { url: edited?.original_url, tags: edited?.tags, max: edited?.max_visits, title: edited?.title },
      { url: `${target.origin}/summer`, tags: ['summer', 'sale'], max: 100, title: 'Spring sale' },
    );
    assert.equal(await page.locator('tr[data-code="spring-sale"] td.url').textContent(), `${target.origin}/summer`);
    // A real redirect now goes to the new destination.
    const visitor = await context.newPage();
    const landed = await visitor.goto(`${origin}/spring-sale`);
    assert.equal(landed?.url(), `${target.origin}/summer`);
    await visitor.close();
    // The dialog shows the destination it had before; Escape closes it and the focus comes back.
    await page.keyboard.press('Enter');
    await dialog.waitFor({ state: 'visible' });
    await page
      .locator('#history li')
      .filter({ hasText: `${target.origin}/spring` })
      .waitFor();
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'Edit spring-sale');

    // The code's stats page, opened from the list in this tab, shows its visits with the key given
    // here: nothing more to type, and the visit of the redirect above is there.
    await page.getByRole('link', { name: 'Stats of spring-sale' }).click();
    await page.locator('#visit-detail').waitFor({ state: 'visible' });
    assert.equal(await page.locator('#token-form').isHidden(), true);
    await page.locator('#total-visits').filter({ hasText: /^1$/ }).waitFor();
    await page.goBack();
    await page.locator('tr[data-code="spring-sale"]').waitFor();

    // One new link with a chosen back-half and tags; a taken back-half is said on its field.
    await page.getByLabel('Long URL').fill(`${target.origin}/made-here`);
    await page.getByLabel('Custom back-half (optional)').fill('spring-sale');
    await page.getByRole('button', { name: 'Create link' }).click();
    await page.locator('#create-alias-error').filter({ hasText: 'This back-half is taken' }).waitFor();
    await page.getByLabel('Custom back-half (optional)').fill('made-here');
    await page.getByLabel('Title (optional)').fill('Made on the page');
    await page.getByLabel('Tags (optional)').fill('page made');
    await page.getByRole('button', { name: 'Create link' }).click();
    await page
      .locator('#create-status')
      .filter({ hasText: `Created ${origin}/made-here` })
      .waitFor();
    await page.locator('tr[data-code="made-here"]').waitFor();
    const made = (await linksOf(key)).find((l) => l.code === 'made-here');
    assert.deepEqual({ title: made?.title, tags: made?.tags }, { title: 'Made on the page', tags: ['page', 'made'] });
    assert.equal(await page.getByLabel('Custom back-half (optional)').inputValue(), '');

    await assertAccessible(page, 'my links');
    await assertAccessibleInDark(page, 'my links');
    await screenshots(page, 'shortener-links');
    await screenshots(page, 'shortener-links', { dark: true });
    await assertNoSidewaysScroll(page, 'the my links page');
    // The key went only in headers: never in an address the page asked for.
    assert.deepEqual(
      w.urls.filter((u) => u.includes(key)),
      [],
    );
    assertClean(w, [400, 401, 409]);
    assertSameOrigin(w, origin);
    await page.close();
  });

  it('imports a CSV (quoted fields, refused rows), in chunks of 1,000, shows and downloads the results, exports; a manager key sees every link', async () => {
    const key = await issueKey('Imports', 'author');
    await bulk(key, [{ url: `${target.origin}/taken`, alias: 'taken-here' }]);
    // With a byte order mark, as spreadsheets save it.
    const csv = [
      '\uFEFFURL,Alias,Title,Tags,Notes',
      `${target.origin}/a,import-a,"Sale, winter",winter|sale,ignored`,
      `${target.origin}/b,,"He said ""hi""",news;launch`,
      'ftp://example.com/x,,,',
      `${target.origin}/c,taken-here,,`,
      ',,no address,',
      `${target.origin}/d,x,,`,
      `"${target.origin}/e?q=1,2",,"two\r\nlines",`,
      // Cells an export protected from spreadsheets: one apostrophe goes.
      `${target.origin}/f,'-dash,'=sum,`,
      '',
    ].join('\r\n');
    const { page, w } = await watchedPage(context);
    const bulkSizes: number[] = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/api/links/bulk')) bulkSizes.push((JSON.parse(r.postData() ?? '[]') as unknown[]).length);
    });
    await page.goto(`${origin}/links`);
    await signIn(page, key);

    await page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'links.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await page.locator('#preview').waitFor({ state: 'visible' });
    assert.equal(
      await page.locator('#preview-summary').textContent(),
      '8 rows: 6 to import, 2 with a problem (not sent). Shown: the first 8 and every row with a problem.',
    );
    const preview = await page
      .locator('#preview-table tbody tr')
      .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
    assert.deepEqual(preview[0], ['2', `${target.origin}/a`, 'import-a', 'Sale, winter', 'winter sale', '—']);
    assert.deepEqual(preview[1], ['3', `${target.origin}/b`, '—', 'He said "hi"', 'news launch', '—']);
    assert.deepEqual(preview[4], ['6', '—', '—', 'no address', '—', 'No URL.']);
    assert.match(preview[5]?.[5] ?? '', /^A back-half is 3 to 64/);
    assert.deepEqual(preview[6]?.slice(0, 4), ['8', `${target.origin}/e?q=1,2`, '—', 'two\r\nlines']);
    assert.deepEqual(preview[7]?.slice(0, 4), ['9', `${target.origin}/f`, '-dash', '=sum']);
    await assertAccessible(page, 'my links import preview');
    await screenshots(page, 'shortener-links-import-preview');

    await page.getByRole('button', { name: 'Import', exact: true }).click();
    await page.locator('#import-status').filter({ hasText: 'Import done: 4 created, 4 refused.' }).waitFor();
    assert.deepEqual(bulkSizes, [6]);
    const results = await page
      .locator('#results-table tbody tr')
      .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
    assert.deepEqual(
      results.map((r) => [r[0], r[2]]),
      [
        ['2', 'Created import-a'],
        ['3', results[1]?.[2]],
        ['4', 'Refused: Only web addresses can be shortened: they start with http:// or https://.'],
        ['5', 'Refused: This back-half is taken (or was used by a deleted link). Choose another one.'],
        ['6', 'Refused: No URL.'],
        ['7', results[5]?.[2]],
        ['8', results[6]?.[2]],
        ['9', 'Created -dash'],
      ],
    );
    assert.match(results[1]?.[2] ?? '', /^Created [0-9A-Za-z]{7}$/);
    assert.match(results[5]?.[2] ?? '', /^Refused: A back-half is 3 to 64/);
    // The created links exist, as the file said.
    const mine = await linksOf(key);
    const byUrl = new Map(mine.map((l) => [l.original_url, l]));
    assert.deepEqual(
      {
        code: byUrl.get(`${target.origin}/a`)?.code,
        title: byUrl.get(`${target.origin}/a`)?.title,
        tags: byUrl.get(`${target.origin}/a`)?.tags,
      },
      { code: 'import-a', title: 'Sale, winter', tags: ['winter', 'sale'] },
    );
    assert.equal(byUrl.get(`${target.origin}/b`)?.title, 'He said "hi"');
    assert.equal(byUrl.get(`${target.origin}/e?q=1,2`)?.title, 'two\r\nlines');
    assert.equal(byUrl.get(`${target.origin}/f`)?.title, '=sum');
    assert.equal(mine.length, 5);
    assert.equal(byUrl.has('ftp://example.com/x'), false);
    // The list shows them already.
    await page
      .locator('#total')
      .filter({ hasText: /^\(5\)$/ })
      .waitFor();
    await assertAccessible(page, 'my links import results');
    await screenshots(page, 'shortener-links-import');

    const resultsFile = await downloaded(page, () => page.getByRole('button', { name: 'Download the results as CSV' }).click());
    assert.equal(resultsFile.name, 'import-results.csv');
    const lines = resultsFile.text.split('\r\n');
    assert.equal(lines[0], 'row,url,alias,title,tags,result,code,short_url,reason');
    assert.equal(lines[1], `2,${target.origin}/a,import-a,"Sale, winter",winter|sale,created,import-a,${origin}/import-a,`);
    assert.equal(lines[3], '4,ftp://example.com/x,,,,refused,,,Only web addresses can be shortened: they start with http:// or https://.');
    // Written back with the formula protection (the last line: the file ends with CRLF).
    assert.equal(lines.at(-2), `9,${target.origin}/f,'-dash,'=sum,,created,'-dash,${origin}/-dash,`);

    // The exports: the key's links, fetched with the key as a header.
    const csvExport = await downloaded(page, () => page.getByRole('button', { name: 'Export as CSV' }).click());
    assert.equal(csvExport.name, 'links.csv');
    assert.match(
      csvExport.text,
      /^code,short_url,original_url,clicks,created_at,expires_at,max_visits,disabled,title,tags,password_protected\r\n/,
    );
    assert.equal(csvExport.text.trim().split('\r\n').length, 1 + 5 + 1, 'a header and 5 links (one title spans two lines)');
    const jsonExport = await downloaded(page, () => page.getByRole('button', { name: 'Export as JSON' }).click());
    assert.equal(jsonExport.name, 'links.json');
    assert.deepEqual((JSON.parse(jsonExport.text) as Array<{ code: string }>).map((l) => l.code).sort(), mine.map((l) => l.code).sort());

    // 1,001 good rows go in two requests of at most 1,000, and all are created.
    bulkSizes.length = 0;
    const big = ['url', ...Array.from({ length: 1001 }, (_, i) => `${target.origin}/many/${i}`)].join('\n');
    await page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'many.csv', mimeType: 'text/csv', buffer: Buffer.from(big) });
    await page.locator('#preview-summary').filter({ hasText: '1,001 rows: 1,001 to import.' }).waitFor();
    await page.getByRole('button', { name: 'Import', exact: true }).click();
    await page.locator('#import-status').filter({ hasText: 'Import done: 1,001 created, 0 refused.' }).waitFor();
    assert.deepEqual(bulkSizes, [1000, 1]);
    const listed = await shortener.app.inject({ method: 'GET', url: '/api/links?per_page=1', headers: { authorization: `Bearer ${key}` } });
    assert.equal(listed.headers['x-total-count'], '1006');
    // The list pages as the API does, the page in the address.
    await page.locator('#page-label').filter({ hasText: 'Page 1 of 41' }).waitFor();
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-label').filter({ hasText: 'Page 2 of 41' }).waitFor();
    assert.equal(new URL(page.url()).search, '?page=2');
    assert.equal(await page.locator('#links-table tbody tr').count(), 25);
    assert.equal(await page.locator('#results-table tbody tr').count(), 500);
    assert.equal(await page.locator('#results-more').textContent(), '501 more rows are in the download.');

    // A file that is not CSV as written (a quote left open) is refused whole, saying where.
    await page
      .getByLabel('CSV file', { exact: true })
      .setInputFiles({ name: 'bad.csv', mimeType: 'text/csv', buffer: Buffer.from('url\n"https://x.example/\n') });
    await page.locator('#import-error').filter({ hasText: 'Line 2: a quoted field is never closed.' }).waitFor();
    assert.equal(await page.locator('#preview').isHidden(), true);

    // Forget the key: the page asks again, and the tab holds nothing.
    await page.getByRole('button', { name: 'Forget key' }).click();
    await page.locator('#key-form').waitFor({ state: 'visible' });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('shortener-api-key')), null);
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'api-key');
    assert.equal(await page.locator('#links-table tbody tr').count(), 0);
    assert.equal(await page.locator('#results').isHidden(), true);
    // A manager key lists every link.
    await signIn(page, await issueKey('Manager', 'manager'));
    const all = (await shortener.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM links')).rows[0]!.n;
    await page
      .locator('#total')
      .filter({ hasText: `(${all.toLocaleString('en')})` })
      .waitFor();
    assertClean(w);
    assertSameOrigin(w, origin);
    await page.close();
  });

  it('works by keyboard alone: key, tag filter, edit and save', async () => {
    const key = await issueKey('Keyboard', 'author');
    await bulk(key, [{ url: `${target.origin}/kb`, alias: 'by-keyboard', tags: ['kb'] }]);
    const { page, w } = await watchedPage(context);
    await page.setViewportSize({ width: 390, height: 800 });
    // An address edited out of the API's bounds shows the whole list rather than a refusal.
    await page.goto(`${origin}/links?page=0&tag=${'t'.repeat(40)}`);
    await tabTo(page, 'api-key');
    await page.keyboard.type(key);
    await page.keyboard.press('Enter');
    await page.locator('tr[data-code="by-keyboard"]').waitFor();
    assert.equal(await page.locator('#total').textContent(), '(1)');
    for (let i = 0; i < 40; i++) {
      if (await page.evaluate(() => document.activeElement?.getAttribute('aria-label') === 'Show links tagged kb')) break;
      await page.keyboard.press('Tab');
    }
    await page.keyboard.press('Enter');
    await page.locator('#total').filter({ hasText: 'tagged kb' }).waitFor();
    for (let i = 0; i < 40; i++) {
      if (await page.evaluate(() => document.activeElement?.getAttribute('aria-label') === 'Edit by-keyboard')) break;
      await page.keyboard.press('Tab');
    }
    await page.keyboard.press('Enter');
    await page.locator('#edit-dialog').waitFor({ state: 'visible' });
    await page.keyboard.press('Tab');
    await page.keyboard.type('Typed title');
    await page.keyboard.press('Enter');
    await page.locator('#links-status').filter({ hasText: 'by-keyboard saved.' }).waitFor();
    assert.equal((await linksOf(key))[0]?.title, 'Typed title');
    await assertNoSidewaysScroll(page, 'the my links page');
    assertClean(w);
    await page.close();
  });
});
