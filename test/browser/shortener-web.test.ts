import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import type { Clock } from '../../src/kit/clock.js';
import type { Pool } from '../../src/kit/db.js';
import {
  assertAccessible,
  assertAccessibleInDark,
  assertClean,
  assertNoSidewaysScroll,
  assertSameOrigin,
  browserSkip,
  type PageWatch,
  screenshots,
  tabTo,
  useBrowser,
  watchedPage,
} from '../helpers/browser.js';
import { freePort } from '../helpers/ports.js';
import { createCode, createLink, type RunningShortener, startShortener as startTestShortener } from '../helpers/shortener.js';
import { startTargetSite, type TargetSite } from '../helpers/target-site.js';

// The shortener's web pages in a real Chromium, driven by clicks, against the
// real service (in-process, listening on 127.0.0.1) and PostgreSQL. Screenshots
// of every page at 360 and 1,280 pixels go to test-artifacts/screenshots/.

const ADMIN_KEY = 'browser-test-admin-key-0123456789abcdef';

type Shortener = RunningShortener & {
  origin: string;
  /** Milliseconds added to the real time on the service's clock. */
  shift: { ms: number };
};

/** A shortener on the database of `pool` when given (one of its own otherwise). */
async function startShortener(pool?: Pool): Promise<Shortener> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const shift = { ms: 0 };
  const clock: Clock = () => Date.now() + shift.ms;
  // Its port is known before it starts, since BASE_URL names it.
  const running = await startTestShortener({ pool, clock, listen: true, port, env: { BASE_URL: origin, SHORTENER_ADMIN_KEY: ADMIN_KEY } });
  return { ...running, origin, shift };
}

describe('shortener web pages in Chromium', { skip: browserSkip }, () => {
  const browser = useBrowser();
  let shortener: Shortener;
  let target: TargetSite;
  let context: BrowserContext;

  before(async () => {
    target = await startTargetSite('Target page');
    shortener = await startShortener();
    // The visits of this test are meant as a person's.
    context = await browser.newContext({ userAgent: browser.desktopUserAgent });
  });

  after(async () => {
    await shortener?.close();
    await target?.close();
  });

  /** Requests go to the shortener and to the links' target site (where a redirect lands), nowhere else. */
  const assertOwnOrigins = (w: PageWatch, origin = shortener.origin) => assertSameOrigin(w, origin, target.origin);

  /** A link created through the API, with the manage token its create returned. */
  const createManaged = async (url: string): Promise<{ code: string; token: string }> => {
    const res = await createLink(shortener.app, url);
    assert.equal(res.status, 201);
    const data = res.body.data as { code: string; manage_token: string };
    return { code: data.code, token: data.manage_token };
  };

  it('creates a link through the form, follows it to the target, and shows the visit on the stats page', async () => {
    const { page, w } = await watchedPage(context);
    const home = await page.goto(`${shortener.origin}/`);
    assert.equal(home?.status(), 200);
    assert.match(home?.headers()['content-security-policy'] ?? '', /script-src 'self'/);
    await assertAccessible(page, 'create page (empty)');

    // A 400 is shown next to the form, in words for a person, on the field.
    await page.getByLabel('Long URL').fill('ftp://example.com/file');
    await page.getByRole('button', { name: 'Shorten' }).click();
    await page.locator('#create-error').waitFor({ state: 'visible' });
    assert.equal(
      await page.locator('#create-error').textContent(),
      'Only web addresses can be shortened: they start with http:// or https://.',
    );
    assert.equal(await page.getByLabel('Long URL').getAttribute('aria-invalid'), 'true');

    const destination = `${target.origin}/landing?from=browser`;
    await page.getByLabel('Long URL').fill(destination);
    await page.getByLabel('Maximum visits (optional)').fill('5');
    await page.getByLabel('Expires (optional)').fill('2099-12-31T23:30');
    await page.getByRole('button', { name: 'Shorten' }).click();
    await page.locator('#result').waitFor({ state: 'visible' });
    assert.equal(await page.locator('#create-error').isHidden(), true);
    const shortUrl = (await page.getByLabel('Short URL').textContent()) ?? '';
    assert.match(shortUrl, new RegExp(`^${shortener.origin}/[0-9a-zA-Z]{7}$`));
    const code = shortUrl.slice(-7);
    const stored = await shortener.pool.query<{ max_visits: string; expires_at: Date }>(
      'SELECT max_visits, expires_at FROM links WHERE code = $1',
      [code],
    );
    assert.equal(Number(stored.rows[0]?.max_visits), 5);
    // The datetime-local value went out with the browser's offset, so the instant is the one typed.
    const typed = await page.evaluate(() => new Date('2099-12-31T23:30').toISOString());
    assert.equal(stored.rows[0]?.expires_at.toISOString(), typed);
    // The QR code image loaded (an SVG from the API).
    const qrWidth = await page.locator('#qr').evaluate(async (img: HTMLImageElement) => {
      await img.decode();
      return img.naturalWidth;
    });
    assert.ok(qrWidth > 0, 'QR code image did not load');
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.locator('#copy-status').waitFor({ state: 'visible' });
    await assertAccessible(page, 'create page (result)');
    await assertAccessibleInDark(page, 'create page (result)');
    await screenshots(page, 'shortener-create');
    await screenshots(page, 'shortener-create', { dark: true });

    // Follow the short link: a 302 from the service, then the target page.
    const { page: visitor, w: vw } = await watchedPage(context);
    const landed = await visitor.goto(shortUrl);
    assert.equal(landed?.url(), destination);
    assert.equal(await visitor.title(), 'Target page');
    assert.equal(landed?.request().redirectedFrom()?.url(), shortUrl);
    assert.equal((await landed?.request().redirectedFrom()?.response())?.status(), 302);
    assert.deepEqual(target.hits, ['/landing?from=browser']);
    assertClean(vw);
    await visitor.close();

    // The create page showed the manage token once; the stats link carries it in its fragment.
    const token = (await page.locator('#manage-token').textContent()) ?? '';
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    // The stats page, reached by its link, shows that visit.
    await page.getByRole('link', { name: 'View its stats' }).click();
    await page.waitForURL(`${shortener.origin}/stats/${code}#token=${token}`);
    await page.locator('#total-visits').filter({ hasText: '1' }).waitFor();
    // The link and its visits are two requests of the page, answered in either order.
    await page.locator('#clicks').filter({ hasText: /^1$/ }).waitFor();
    assert.equal(await page.locator('#clicks').textContent(), '1');
    assert.equal(await page.locator('#state').textContent(), 'active');
    assert.equal(await page.locator('#total-humans').textContent(), '1');
    assert.equal(await page.locator('#total-unique').textContent(), '1');
    // The chart's data: one hourly bucket (the current hour) holds the visit.
    const hourly = await page
      .locator('#series-table tbody tr')
      .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
    assert.ok(hourly.length >= 24 && hourly.length <= 25, `${hourly.length} hourly buckets`);
    assert.deepEqual(
      hourly.filter((r) => r[1] !== '0').map((r) => r.slice(1)),
      [['1', '1']],
    );
    assert.equal(await page.locator('#chart canvas').count(), 1);
    assert.deepEqual(await page.locator('#top-referrers tbody tr').evaluateAll((rows) => rows.map((r) => r.textContent)), ['(direct)1']);
    assert.deepEqual(await page.locator('#top-browsers tbody tr').evaluateAll((rows) => rows.map((r) => r.textContent)), ['Chrome1']);
    assert.deepEqual(await page.locator('#top-operating_systems tbody tr').evaluateAll((rows) => rows.map((r) => r.textContent)), [
      'Linux1',
    ]);
    assert.equal(await page.locator('#top-devices tbody tr td.num').textContent(), '1');
    // Another preset: 7 days per day, the visit in today's bucket.
    await page.getByLabel('7 days').check();
    await page.locator('#range-label').filter({ hasText: '7 days' }).waitFor();
    const daily = await page
      .locator('#series-table tbody tr')
      .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
    assert.deepEqual(
      daily.filter((r) => r[1] !== '0').map((r) => r.slice(1)),
      [['1', '1']],
    );
    // A chosen range: whole UTC days, today included.
    await page.getByLabel('Chosen dates').check();
    await page.getByRole('button', { name: 'Show' }).click();
    await page.locator('#range-label').filter({ hasText: 'per day (UTC)' }).waitFor();
    assert.equal(await page.locator('#total-visits').textContent(), '1');
    await page.getByLabel('30 days').check();
    await page.locator('#range-label').filter({ hasText: '30 days' }).waitFor();
    await assertAccessible(page, 'stats page');
    await assertAccessibleInDark(page, 'stats page');
    await screenshots(page, 'shortener-stats');
    await screenshots(page, 'shortener-stats', { dark: true });
    assertClean(w, [400]);
    assertOwnOrigins(w);
    await page.close();
  });

  it('an unknown or malformed code gets the not-found page with a 404', async () => {
    const { page, w } = await watchedPage(context);
    for (const code of ['zzzzzzz', 'bad']) {
      const res = await page.goto(`${shortener.origin}/stats/${code}`);
      assert.equal(res?.status(), 404);
      assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Link not found');
    }
    await assertAccessible(page, 'not-found page');
    await screenshots(page, 'shortener-not-found');
    // Chromium logs the 404 of the document itself.
    assertClean(w, [404]);
    assertOwnOrigins(w);
    await page.close();
  });

  it('the create form: "Shortening…" while it runs, https:// added and shown, over-long and own links refused in words, no stale result', async () => {
    const { page, w } = await watchedPage(context);
    const posts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST') posts.push(r.postData() ?? '');
    });
    await page.goto(`${shortener.origin}/`);
    const button = page.locator('#create-button');

    // While the create runs, the button says so and is off. (The request is held until the test lets it go.)
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    await page.route('**/api/links', async (route) => {
      await held;
      await route.continue();
    });
    await page.getByLabel('Long URL').fill(`${target.origin}/first`);
    await button.click();
    await page.locator('#create-button', { hasText: 'Shortening…' }).waitFor();
    assert.equal(await button.isDisabled(), true);
    release();
    await page.locator('#result').waitFor({ state: 'visible' });
    assert.equal(await button.textContent(), 'Shorten');
    assert.equal(await button.isEnabled(), true);
    await page.unroute('**/api/links');

    // An address without its scheme: https:// is added, and the person sees it in the field and the result.
    await page.getByLabel('Long URL').fill('example.com/page');
    await button.click();
    await page.locator('#original-url').filter({ hasText: 'https://example.com/page' }).waitFor();
    assert.equal(await page.getByLabel('Long URL').inputValue(), 'https://example.com/page');
    assert.equal(await page.locator('#create-note').textContent(), 'Added https:// in front of the address: https://example.com/page');
    const made = (await page.getByLabel('Short URL').textContent()) ?? '';
    assert.equal(JSON.parse(posts.at(-1) ?? '{}').url, 'https://example.com/page');

    // 3,020 characters: refused with the length, never cut to 2,048 and created for somewhere else.
    const before = posts.length;
    const long = `${target.origin}/${'a'.repeat(3020 - target.origin.length - 1)}`;
    await page.getByLabel('Long URL').fill(long);
    assert.equal((await page.getByLabel('Long URL').inputValue()).length, 3020);
    await button.click();
    await page
      .locator('#create-error')
      .filter({ hasText: 'This address is 3,020 characters long; a short link can hold at most 2,048.' })
      .waitFor();
    assert.equal(posts.length, before, 'nothing was sent');
    // The previous result is gone: it is not the answer to what is in the field now.
    assert.equal(await page.locator('#result').isHidden(), true);
    assert.equal(await page.getByLabel('Long URL').getAttribute('aria-invalid'), 'true');

    // A short link of this very service: refused by the API, told in words.
    await page.getByLabel('Long URL').fill(made);
    await button.click();
    await page
      .locator('#create-error')
      .filter({ hasText: 'This is already a short link of this service. Shorten the address it leads to instead.' })
      .waitFor();
    assert.equal((await shortener.pool.query('SELECT count(*)::int AS n FROM links WHERE original_url = $1', [made])).rows[0].n, 0);

    // Every message of the form is written for a person: no field paths, no validator words.
    for (const text of ['not a url at all', 'javascript:alert(1)', 'https://user:pw@example.com/']) {
      await page.getByLabel('Long URL').fill(text);
      await button.click();
      await page.locator('#create-error').waitFor({ state: 'visible' });
      const said = (await page.locator('#create-error').textContent()) ?? '';
      assert.doesNotMatch(said, /body\/|must NOT|\burl\b/, said);
    }

    // At a phone's width the whole short URL shows, code included.
    await page.getByLabel('Long URL').fill(`${target.origin}/on-a-phone`);
    await button.click();
    await page.locator('#result').waitFor({ state: 'visible' });
    await page.setViewportSize({ width: 390, height: 800 });
    const box = await page.locator('#short-url').evaluate((n) => ({
      scroll: n.scrollWidth,
      client: n.clientWidth,
      right: n.getBoundingClientRect().right,
    }));
    assert.ok(box.scroll <= box.client && box.right <= 390, `short URL cut: ${JSON.stringify(box)}`);
    await screenshots(page, 'shortener-create-phone-result');
    await assertNoSidewaysScroll(page, 'the create page with its result');
    assertClean(w, [400]);
    assertOwnOrigins(w);
    await page.close();
  });

  it('a dead short link shows a page saying why, and one enabled again redirects in the same browser (no cached 410)', async () => {
    const { page, w } = await watchedPage(context);
    const code = await createCode(shortener.app, `${target.origin}/comes-back`);
    await shortener.pool.query('UPDATE links SET disabled = true WHERE code = $1', [code]);
    const dead = await page.goto(`${shortener.origin}/${code}`);
    assert.equal(dead?.status(), 410);
    assert.equal(dead?.headers()['cache-control'], 'no-store');
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Link disabled');
    await assertAccessible(page, 'dead link page');
    await screenshots(page, 'shortener-link-disabled');
    // Enabled again: the very same navigation in the same browser now lands on the target.
    await shortener.pool.query('UPDATE links SET disabled = false WHERE code = $1', [code]);
    await page.goto('about:blank');
    const back = await page.goto(`${shortener.origin}/${code}`);
    assert.equal(back?.url(), `${target.origin}/comes-back`);
    // Expired, used up and unknown links say so too.
    await shortener.pool.query("UPDATE links SET expires_at = '2026-03-01T12:00:00Z' WHERE code = $1", [code]);
    await page.goto(`${shortener.origin}/${code}`);
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Link expired');
    assert.match((await page.locator('main p').first().textContent()) ?? '', /expired on 1 March 2026 at 12:00 UTC/);
    await screenshots(page, 'shortener-link-expired');
    await shortener.pool.query('UPDATE links SET expires_at = NULL, max_visits = clicks WHERE code = $1', [code]);
    await page.goto(`${shortener.origin}/${code}`);
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Link used up');
    await page.goto(`${shortener.origin}/zzzzzzz`);
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Link not found');
    await assertNoSidewaysScroll(page, 'the dead link page');
    assertClean(w, [404, 410]);
    assertOwnOrigins(w);
    await page.close();
  });

  it('the 11th create within a minute shows the wait, counts it down and enables the button again', async () => {
    // Its own service, so the window of 127.0.0.1 starts here; its clock is moved so the wait is seconds, not a minute.
    const own = await startShortener(shortener.pool);
    const { page, w } = await watchedPage(context);
    try {
      await page.goto(`${own.origin}/`);
      const windowStart = Date.now();
      const button = page.getByRole('button', { name: 'Shorten' });
      let previous = '';
      for (let i = 1; i <= 10; i++) {
        await page.getByLabel('Long URL').fill(`${target.origin}/page-${i}`);
        await button.click();
        await page.waitForFunction((before) => {
          const v = document.getElementById('short-url')?.textContent ?? '';
          return v !== '' && v !== before;
        }, previous);
        previous = (await page.getByLabel('Short URL').textContent()) ?? '';
      }
      // 56 s of the 60 s window gone on the service's clock: the 11th waits about 4 s, more by as
      // long as a busy machine took between windowStart and the first create reaching the service.
      own.shift.ms = windowStart + 56_000 - Date.now();
      await page.getByLabel('Long URL').fill(`${target.origin}/page-11`);
      await button.click();
      const wait = page.locator('#create-wait');
      await wait.waitFor({ state: 'visible' });
      const first = Number(/in (\d+) second/.exec((await wait.textContent()) ?? '')?.[1]);
      assert.ok(first >= 1 && first <= 10, `wait shown: ${await wait.textContent()}`);
      assert.equal(await button.isDisabled(), true);
      // The result of the last create is not left on screen beside the refusal.
      assert.equal(await page.locator('#result').isHidden(), true);
      await screenshots(page, 'shortener-create-rate-limited');
      // The count goes down, then the wait disappears and the button works again.
      if (first > 1) await wait.filter({ hasText: `in ${first - 1} second` }).waitFor();
      await wait.waitFor({ state: 'hidden', timeout: 20_000 });
      assert.equal(await button.isDisabled(), false);
      await button.click();
      await page.waitForFunction((before) => (document.getElementById('short-url')?.textContent ?? '') !== before, previous);
      assertClean(w, [429]);
      assertOwnOrigins(w, own.origin);
    } finally {
      await page.close();
      await own.close();
    }
  });

  it('admin: a wrong key is told, then the right one lists, searches, disables (410), edits and deletes after confirming (404)', async () => {
    const tag = `admin-ui-${Date.now()}`;
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) codes.push(await createCode(shortener.app, `https://example.org/${tag}/${i}`));
    const others = await createCode(shortener.app, 'https://example.net/not-in-the-search');
    const { page, w } = await watchedPage(context);
    await page.goto(`${shortener.origin}/admin`);
    await assertAccessible(page, 'admin key form');
    await page.getByLabel('Admin key (SHORTENER_ADMIN_KEY)').fill('not-the-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#key-error').filter({ hasText: 'was not accepted' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('shortener-admin-key')), null);
    await screenshots(page, 'shortener-admin-key');

    await page.getByLabel('Admin key (SHORTENER_ADMIN_KEY)').fill(ADMIN_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#admin').waitFor({ state: 'visible' });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('shortener-admin-key')), ADMIN_KEY);
    assert.equal(await page.evaluate(() => localStorage.length), 0);
    await page.locator(`tr[data-code="${others}"]`).waitFor();

    await page.getByLabel('Search by code or URL').fill(tag);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('#total').filter({ hasText: '(3 matching)' }).waitFor();
    const rows = page.locator('#links-table tbody tr');
    assert.deepEqual((await rows.evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).dataset.code))).sort(), [...codes].sort());

    // Disable: the short link answers 410.
    const [disabled, edited, deleted] = codes as [string, string, string];
    await page.getByRole('button', { name: `Disable ${disabled}` }).click();
    await page.getByRole('button', { name: `Enable ${disabled}` }).waitFor();
    assert.equal((await fetch(`${shortener.origin}/${disabled}`, { redirect: 'manual' })).status, 410);

    // Edit: max visits and expiry.
    await page.getByRole('button', { name: `Edit ${edited}` }).click();
    await page.getByLabel('Maximum visits').fill('3');
    await page.getByLabel('Expires', { exact: true }).fill('2099-01-01T12:00');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator(`tr[data-code="${edited}"] td.num`).nth(1).filter({ hasText: '3' }).waitFor();
    const stats = (await (await fetch(`${shortener.origin}/api/links/${edited}`)).json()) as {
      data: { max_visits: number; expires_at: string };
    };
    assert.equal(stats.data.max_visits, 3);
    assert.equal(stats.data.expires_at, await page.evaluate(() => new Date('2099-01-01T12:00').toISOString()));

    // Delete: cancelling keeps the link; confirming removes it, and the short link is a 404.
    await page.getByRole('button', { name: `Delete ${deleted}` }).click();
    const dialog = page.getByRole('dialog', { name: `Delete ${deleted}?` });
    await dialog.waitFor({ state: 'visible' });
    await screenshots(page, 'shortener-admin-delete-dialog');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal((await fetch(`${shortener.origin}/${deleted}`, { redirect: 'manual' })).status, 302);
    await page.getByRole('button', { name: `Delete ${deleted}` }).click();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await page.locator('#total').filter({ hasText: '(2 matching)' }).waitFor();
    assert.equal(await page.locator(`tr[data-code="${deleted}"]`).count(), 0);
    assert.equal((await fetch(`${shortener.origin}/${deleted}`, { redirect: 'manual' })).status, 404);

    // Each row links to its stats page.
    assert.equal(await page.getByRole('link', { name: `Stats of ${edited}` }).getAttribute('href'), `/stats/${edited}`);
    await assertAccessible(page, 'admin list');
    await assertAccessibleInDark(page, 'admin list');
    await screenshots(page, 'shortener-admin');
    assertClean(w, [401]);
    assertOwnOrigins(w);
    await page.close();
  });
  it('the stats page shows visits only with the manage token: without it the public figures and a form, a wrong token refused', async () => {
    const { code, token } = await createManaged(`${target.origin}/private`);
    const other = await createManaged(`${target.origin}/someone-elses`);
    const res = await fetch(`${shortener.origin}/${code}`, { redirect: 'manual', headers: { referer: 'https://intranet.corp/page' } });
    assert.equal(res.status, 302);
    // Its manager changed the destination once: the stats page lists the earlier one, to the manager only.
    const changed = await fetch(`${shortener.origin}/api/links/${code}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${target.origin}/private-moved` }),
    });
    assert.equal(changed.status, 200);
    const { page, w } = await watchedPage(context);
    await page.goto(`${shortener.origin}/stats/${code}`);
    await page.locator('#clicks').filter({ hasText: /^1$/ }).waitFor();
    await page.getByLabel('Manage token or admin key').waitFor();
    assert.equal(await page.locator('#visit-detail').isHidden(), true);
    assert.equal(await page.locator('#sources').isHidden(), true);
    // Without a token the page never asked for the visits.
    assert.ok(!w.urls.some((u) => u.includes('/visits')), w.urls.join('\n'));
    await assertAccessible(page, 'stats page (no token)');
    // Another link's token is refused, in words.
    await page.getByLabel('Manage token or admin key').fill(other.token);
    await page.getByRole('button', { name: 'Show visits' }).click();
    await page.locator('#token-error').filter({ hasText: 'does not manage this link' }).waitFor();
    assert.equal(await page.locator('#visit-detail').isHidden(), true);
    // The right one shows them.
    await page.getByLabel('Manage token or admin key').fill(token);
    await page.getByRole('button', { name: 'Show visits' }).click();
    await page.locator('#total-visits').filter({ hasText: '1' }).waitFor();
    assert.equal(await page.locator('#token-form').isHidden(), true);
    assert.deepEqual(await page.locator('#top-referrers tbody tr').evaluateAll((rows) => rows.map((r) => r.textContent)), [
      'intranet.corp1',
    ]);
    await page.locator('#history').waitFor({ state: 'visible' });
    assert.match((await page.locator('#history-list').textContent()) ?? '', new RegExp(`^${target.origin}/private \\(until `));
    await assertAccessible(page, 'stats page (with the token)');
    assertClean(w, [403]);
    assertOwnOrigins(w);
    await page.close();
  });

  it('a custom back-half is chosen on the create page; a taken one is refused in words on its field', async () => {
    const alias = `launch-${Date.now()}`;
    // Earlier tests created links from this address within the minute: a fresh rate-limit window.
    shortener.shift.ms += 61_000;
    const { page, w } = await watchedPage(context);
    await page.goto(`${shortener.origin}/`);
    await page.getByLabel('Long URL').fill(`${target.origin}/launch`);
    await page.getByLabel('Custom back-half (optional)').fill(alias);
    await page.getByRole('button', { name: 'Shorten' }).click();
    await page.locator('#result').waitFor({ state: 'visible' });
    assert.equal(await page.getByLabel('Short URL').textContent(), `${shortener.origin}/${alias}`);
    await page.getByRole('button', { name: 'Shorten' }).click();
    await page.locator('#create-error').filter({ hasText: 'This back-half is taken' }).waitFor();
    assert.equal(await page.getByLabel('Custom back-half (optional)').getAttribute('aria-invalid'), 'true');
    await page.getByLabel('Custom back-half (optional)').fill('admin-area');
    await page.getByRole('button', { name: 'Shorten' }).click();
    await page.locator('#create-error').filter({ hasText: 'names a page of this service' }).waitFor();
    await assertAccessible(page, 'create page (back-half refused)');
    assertClean(w, [400, 409]);
    assertOwnOrigins(w);
    await page.close();
  });

  it('the stats page splits humans, bots and link previews, and counts unique visitors', async () => {
    const { code, token } = await createManaged(`${target.origin}/split`);
    const agents = [
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
      'curl/8.4.0',
      'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
    ];
    for (const agent of agents) {
      const res = await fetch(`${shortener.origin}/${code}`, { redirect: 'manual', headers: { 'user-agent': agent } });
      assert.equal(res.status, 302);
    }
    const { page, w } = await watchedPage(context);
    await page.goto(`${shortener.origin}/stats/${code}#token=${token}`);
    await page.locator('#total-visits').filter({ hasText: '4' }).waitFor();
    await page.locator('#clicks').filter({ hasText: /^4$/ }).waitFor();
    const figures = await Promise.all(
      ['#total-humans', '#total-bots', '#total-previews', '#total-unique', '#clicks'].map((id) => page.locator(id).textContent()),
    );
    // One address, three agents: three visitors today.
    assert.deepEqual(figures, ['2', '1', '1', '3', '4']);
    assertClean(w);
    assertOwnOrigins(w);
    await page.close();
  });

  it('admin pages through a search 20 links at a time', async () => {
    const tag = `paging-${Date.now()}`;
    for (let i = 0; i < 45; i++) await createCode(shortener.app, `https://example.org/${tag}/${i}`);
    const { page, w } = await watchedPage(context);
    await page.goto(`${shortener.origin}/admin`);
    await page.getByLabel('Admin key (SHORTENER_ADMIN_KEY)').fill(ADMIN_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#admin').waitFor({ state: 'visible' });
    await page.getByLabel('Search by code or URL').fill(tag);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('#total').filter({ hasText: '(45 matching)' }).waitFor();
    const rows = page.locator('#links-table tbody tr');
    const seen = new Set<string>();
    const collect = async () => {
      for (const c of await rows.evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).dataset.code ?? ''))) seen.add(c);
    };
    assert.equal(await page.locator('#page-label').textContent(), 'Page 1 of 3');
    assert.equal(await rows.count(), 20);
    assert.equal(await page.getByRole('button', { name: 'Previous page' }).isDisabled(), true);
    await collect();
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-label').filter({ hasText: 'Page 2 of 3' }).waitFor();
    assert.equal(await rows.count(), 20);
    await collect();
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.locator('#page-label').filter({ hasText: 'Page 3 of 3' }).waitFor();
    assert.equal(await rows.count(), 5);
    assert.equal(await page.getByRole('button', { name: 'Next page' }).isDisabled(), true);
    await collect();
    assert.equal(seen.size, 45, 'every link once over the three pages');
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.locator('#page-label').filter({ hasText: 'Page 2 of 3' }).waitFor();
    assertClean(w);
    assertOwnOrigins(w);
    await page.close();
  });

  it('by keyboard alone a link is created, copied and its stats opened; at 360 px no page scrolls sideways', async () => {
    const { page, w } = await watchedPage(context);
    await page.setViewportSize({ width: 360, height: 800 });
    await page.goto(`${shortener.origin}/`);
    await assertNoSidewaysScroll(page, 'the create page');
    await tabTo(page, 'url');
    await page.keyboard.type(`${target.origin}/by-keyboard`);
    await page.keyboard.press('Enter');
    await page.locator('#result').waitFor({ state: 'visible' });
    await assertNoSidewaysScroll(page, 'the create page with its result');
    const shortUrl = (await page.getByLabel('Short URL').textContent()) ?? '';
    await tabTo(page, 'copy-button');
    await page.keyboard.press('Enter');
    await page.locator('#copy-status').waitFor({ state: 'visible' });
    await tabTo(page, 'stats-link');
    await page.keyboard.press('Enter');
    await page.waitForURL(new RegExp(`^${shortener.origin}/stats/${shortUrl.slice(-7)}#token=[A-Za-z0-9_-]{43}$`));
    await page.locator('#state').filter({ hasText: 'active' }).waitFor();
    await assertNoSidewaysScroll(page, 'the stats page');
    await page.goto(`${shortener.origin}/stats/zzzzzzz`);
    await assertNoSidewaysScroll(page, 'the not-found page');
    await page.goto(`${shortener.origin}/admin`);
    await tabTo(page, 'admin-key');
    await page.keyboard.type(ADMIN_KEY);
    await page.keyboard.press('Enter');
    await page.locator('#admin').waitFor({ state: 'visible' });
    await page.locator('#links-table tbody tr').first().waitFor();
    await assertNoSidewaysScroll(page, 'the admin page');
    assertClean(w, [404]);
    assertOwnOrigins(w);
    await page.close();
  });
});
