import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, type BrowserContextOptions, chromium, type Locator, type Page } from 'playwright-core';

// What every browser test shares: the Chromium it drives, how a page is
// watched for errors, the accessibility scan and the screenshots.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCREENSHOTS = path.join(root, 'test-artifacts', 'screenshots');
const AXE_SOURCE = readFileSync(path.join(root, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// As root, Chromium needs --no-sandbox; the networking flags stop its background
// connections (updates, sync, QUIC probes), which fail here and must not leave the machine.
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
/** Screenshots are taken at a phone's width and a desktop's. */
export const SCREENSHOT_WIDTHS = [390, 1280] as const;
/** The narrowest phone a page must fit without scrolling sideways. */
export const NARROWEST = 360;

const chromiumMissing = !existsSync(CHROMIUM);
/** Under CI a missing browser fails the suite; elsewhere it may skip, saying why. */
export const browserSkip: string | false =
  chromiumMissing && !process.env.CI ? `Chromium not found at ${CHROMIUM} (install it or set CHROMIUM_PATH)` : false;
if (browserSkip) console.log(`# skipping the browser tests: ${browserSkip}`);

async function launchBrowser(): Promise<Browser> {
  if (chromiumMissing)
    assert.fail(
      `Chromium not found at ${CHROMIUM}: under CI the browser tests must run, never be skipped (install chromium or set CHROMIUM_PATH)`,
    );
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
}

/** What a test drives pages with: Chromium, its contexts, and pages watched from their first request. */
export interface TestBrowser {
  /** The browser itself, for what the methods below do not cover. */
  readonly chromium: Browser;
  /**
   * Desktop Chrome's user agent at this Chromium's version. Headless Chromium says "HeadlessChrome",
   * which the shortener rightly counts as a bot; a context meant as a person's visits sends this one.
   */
  readonly desktopUserAgent: string;
  /** A new context: a desktop's 1,280 × 800 viewport unless `options` say otherwise, and 20 s for each wait. */
  newContext(options?: BrowserContextOptions): Promise<BrowserContext>;
  /** A page in a new context of its own (as `newContext`), watched from its first request. */
  newPage(options?: BrowserContextOptions): Promise<WatchedPage>;
}

export interface WatchedPage {
  page: Page;
  w: PageWatch;
  context: BrowserContext;
}

/**
 * Chromium for the tests of the describe it is called in: launched before them, closed after them
 * with every context opened in it. Called first in the describe, its hooks run before the file's own:
 * the browser starts before the services and is closed before them.
 */
export function useBrowser(): TestBrowser {
  let browser: Browser | undefined;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });
  const launched = (): Browser => browser ?? assert.fail('the browser is used before its before hook ran');
  const newContext = async (options: BrowserContextOptions = {}): Promise<BrowserContext> => {
    const context = await launched().newContext({ viewport: { width: 1280, height: 800 }, ...options });
    context.setDefaultTimeout(20_000);
    return context;
  };
  return {
    get chromium() {
      return launched();
    },
    get desktopUserAgent() {
      return `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${launched().version()} Safari/537.36`;
    },
    newContext,
    newPage: async (options) => {
      const context = await newContext(options);
      return { ...(await watchedPage(context)), context };
    },
  };
}

/** A new page of `context`, watched from its first request. */
export async function watchedPage(context: BrowserContext): Promise<{ page: Page; w: PageWatch }> {
  const page = await context.newPage();
  return { page, w: watch(page) };
}

/** What went wrong on a page (console errors, uncaught exceptions, failed requests), and every request's URL. */
export interface PageWatch {
  problems(): string[];
  urls: string[];
}

export function watch(page: Page): PageWatch {
  const problems: string[] = [];
  const urls: string[] = [];
  // A request still loading when the page navigates away (its icon, typically)
  // is aborted by the browser: that is the navigation's doing, not the page's
  // fault. Such a failure counts only if no navigation followed its start.
  let navigations = 0;
  const startedAt = new Map<object, number>();
  const aborted: Array<{ text: string; at: number }> = [];
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) navigations++;
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('request', (r) => {
    urls.push(r.url());
    startedAt.set(r, navigations);
  });
  page.on('requestfailed', (r) => {
    const text = `requestfailed: ${r.url()} ${r.failure()?.errorText}`;
    if (r.failure()?.errorText === 'net::ERR_ABORTED') aborted.push({ text, at: startedAt.get(r) ?? navigations });
    else problems.push(text);
  });
  return {
    urls,
    problems: () => [...problems, ...aborted.filter((a) => a.at >= navigations).map((a) => a.text)],
  };
}

/**
 * Nothing went wrong on the page but the API refusals the test caused on
 * purpose (Chromium logs each non-2xx fetch as "Failed to load resource").
 */
export function assertClean(w: PageWatch, expectedStatuses: number[] = []): void {
  const unexpected = w.problems().filter((p) => {
    const m = /Failed to load resource: the server responded with a status of (\d+)/.exec(p);
    return !(m && expectedStatuses.includes(Number(m[1])));
  });
  assert.deepEqual(unexpected, []);
}

/** The axe scan of the page as it stands, in the dark colour scheme (prefers-color-scheme: dark); the scheme is restored after. */
export async function assertAccessibleInDark(page: Page, name: string): Promise<void> {
  await page.emulateMedia({ colorScheme: 'dark' });
  try {
    await assertAccessible(page, `${name} (dark)`);
  } finally {
    await page.emulateMedia({ colorScheme: 'light' });
  }
}

export async function assertAccessible(page: Page, name: string): Promise<void> {
  // Evaluated rather than added as a <script>: the pages' CSP refuses inline scripts.
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (
      globalThis as unknown as {
        axe: { run(): Promise<{ violations: Array<{ id: string; impact: string; help: string; nodes: Array<{ target: unknown }> }> }> };
      }
    ).axe;
    const result = await axe.run();
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.map((n) => JSON.stringify(n.target)).slice(0, 5),
    }));
  });
  // Every violation but the minor ones fails: a moderate one such as two landmarks of the same name
  // (landmark-unique) leaves a screen reader's list of regions ambiguous.
  const found = violations.filter((v) => v.impact !== 'minor');
  assert.deepEqual(found, [], `${name}: accessibility violations`);
}

/**
 * Full-page screenshots at each width, as `test-artifacts/screenshots/<name>-<width>.png`
 * (`<name>-dark-<width>.png` in the dark colour scheme). The viewport is left at 1,280 px.
 */
export async function screenshots(page: Page, name: string, { dark = false }: { dark?: boolean } = {}): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  if (dark) await page.emulateMedia({ colorScheme: 'dark' });
  try {
    for (const width of SCREENSHOT_WIDTHS) {
      await page.setViewportSize({ width, height: 800 });
      // Let layout and any resize observer settle.
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      await page.screenshot({ path: path.join(SCREENSHOTS, `${name}${dark ? '-dark' : ''}-${width}.png`), fullPage: true });
    }
  } finally {
    if (dark) await page.emulateMedia({ colorScheme: 'light' });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** Fails unless every request the page made went to one of `origins` (or was a `data:` URL). */
export function assertSameOrigin(w: PageWatch, ...origins: string[]): void {
  assert.deepEqual(
    w.urls.filter((u) => !u.startsWith('data:') && !origins.some((o) => u.startsWith(`${o}/`))),
    [],
    'requests to other origins',
  );
}

/** Presses Tab until the element with this id has the focus; fails after `presses` presses. */
export async function tabTo(page: Page, id: string, presses = 40): Promise<void> {
  for (let i = 0; i < presses; i++) {
    if (await page.evaluate((want) => document.activeElement?.id === want, id)) return;
    await page.keyboard.press('Tab');
  }
  assert.fail(`Tab never reached #${id}`);
}

/** Fails if the page as it stands scrolls sideways at the narrowest phone's width (NARROWEST); the viewport is left as it was. */
export async function assertNoSidewaysScroll(page: Page, name: string): Promise<void> {
  const narrow = NARROWEST;
  const viewport = page.viewportSize();
  if (viewport?.width !== narrow) await page.setViewportSize({ width: narrow, height: 800 });
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  if (viewport && viewport.width !== narrow) await page.setViewportSize(viewport);
  assert.ok(width <= narrow, `${name} is ${width} px wide at ${narrow} px`);
}

/**
 * Where the text of an element wraps onto a new line, as the characters on
 * either side of each break: what a test needs to tell a break between words
 * (or after an email's "@") from one inside a word or a number.
 */
export async function lineBreaks(locator: Locator): Promise<Array<[string, string]>> {
  return locator.evaluate((node) => {
    const chars: Array<[string, number]> = [];
    const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode() as Text | null; text; text = walker.nextNode() as Text | null) {
      for (let i = 0; i < text.data.length; i++) {
        const range = document.createRange();
        range.setStart(text, i);
        range.setEnd(text, i + 1);
        const rect = range.getClientRects()[0];
        if (rect) chars.push([text.data[i]!, rect.top]);
      }
    }
    const breaks: Array<[string, string]> = [];
    for (let i = 1; i < chars.length; i++) if (chars[i]![1] > chars[i - 1]![1] + 1) breaks.push([chars[i - 1]![0], chars[i]![0]]);
    return breaks;
  });
}
