import { domainToASCII } from 'node:url';
import { isUniqueViolation } from '../kit/db.js';
import { HttpError, badRequest } from '../kit/errors.js';
import { isStorableText } from '../kit/text.js';
import type { Clock } from '../kit/clock.js';
import { ClickCounter, type ClickOutcome } from './click-counter.js';
import { CODE_PATTERN, type CodeGenerator } from './codes.js';
import { DELETED_CODE_CONSTRAINT, type Link, type LinkRepository, type Refusal, UNIQUE_CODE_CONSTRAINT } from './repository.js';
import { type VisitRange, type VisitReport, visitReport } from './visit-report.js';
import { AgentParser, VisitorKeys, isoDay } from './visits.js';

export const MAX_CODE_ATTEMPTS = 5;
/** How long after its end a day's visits are rolled up into daily rows. */
export const VISIT_DAY_SETTLE_MS = 60 * 60_000;
export const MAX_URL_LENGTH = 2048;
/** The largest max_visits accepted (any real cap is far below; it keeps the number exact in JSON). */
export const MAX_VISITS_LIMIT = 1_000_000_000_000;
const ALLOWED_PROTOCOLS = new Set(['http:', 'https:']);

// What the WHATWG parser strips from both ends before parsing: C0 controls and space.
const SURROUNDING = /^[\u0000-\u0020]+|[\u0000-\u0020]+$/g;
// The authority as RFC 3986 (and a person) reads it: after "scheme://", up to the first / ? or #.
const SCHEME_AND_AUTHORITY = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/([^/?#]*)/;
const PORT = /:\d*$/;
const IPV4 = /^\d+\.\d+\.\d+\.\d+$/;
const ASCII = /^[\x00-\x7f]*$/;

/**
 * Whether the host written in the URL is the host the redirect reaches. The
 * parser may only change its spelling in ways every browser shows and resolves
 * alike: case, an IDN's punycode, IPv6 compression. Percent-escapes and the
 * legacy numeric IPv4 forms (0x7f.1, 2130706433, 010.0.0.1 read as octal) are
 * refused: a reader cannot tell where they go.
 */
function hostReadsAsReached(written: string, reached: string): boolean {
  if (written.toLowerCase() === reached) return true;
  if (written.startsWith('[')) return reached.startsWith('[');
  if (ASCII.test(written) || written.includes('%')) return false;
  return domainToASCII(written) === reached && !IPV4.test(reached);
}

/**
 * Rule 1 beyond what the schema checks: the text parses as a URL with an
 * allowed protocol, and it goes where it reads. original_url is shown as
 * submitted (create, stats) while the redirect goes to the parser's form, so
 * whatever would make the two disagree on the host or the path is refused:
 * credentials before the host (https://good.com@evil.com/), a backslash
 * before the query (read as "/": http://evil.com\@good.com/ goes to
 * evil.com), tabs and line breaks (deleted by the parser), a missing "//",
 * and hosts the parser rewrites beyond case, IDN and IPv6 compression.
 */
export function validateTargetUrl(raw: string): void {
  // Text that parses as a URL but cannot be stored as given: U+0000 made the insert fail with a
  // 500, and a lone surrogate would come back as U+FFFD, a different URL from the one submitted.
  if (!isStorableText(raw)) throw badRequest('url must not contain U+0000 or unpaired surrogates');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest('url must be a valid absolute URL');
  }
  if (!ALLOWED_PROTOCOLS.has(url.protocol)) {
    throw badRequest(`url protocol "${url.protocol}" is not allowed: only http and https`);
  }
  const text = raw.replace(SURROUNDING, '');
  if (/[\t\n\r]/.test(text)) {
    throw badRequest('url must not contain tabs or line breaks: browsers delete them, so the link would not go where it reads');
  }
  if (text.split(/[?#]/, 1)[0]!.includes('\\')) {
    throw badRequest('url must not contain a backslash before the query: browsers read it as "/", so the link would not go where it reads');
  }
  const authority = SCHEME_AND_AUTHORITY.exec(text)?.[1];
  if (!authority) throw badRequest('url must start with http:// or https:// followed by the host');
  if (authority.includes('@') || url.username !== '' || url.password !== '') {
    throw badRequest('url must not contain credentials (user:password@ before the host): the link would show one host and go to another');
  }
  if (!hostReadsAsReached(authority.replace(PORT, ''), url.hostname)) {
    throw badRequest('url host must be written as it is reached: no percent-escapes and no numeric IPv4 forms other than a.b.c.d');
  }
}

/** Well-formed codes only reach the database (rule 4). */
export const isWellFormedCode = (code: string) => CODE_PATTERN.test(code);

/** What a visitor sends that the visit records (coarsened before it is stored). */
export interface VisitorRequest {
  ip: string | undefined;
  userAgent: string | undefined;
  referer: string | undefined;
}

/** A link's lifecycle state: only an active link redirects. */
export type LinkState = 'active' | Refusal;

export interface LinkLimits {
  expiresAt?: Date;
  maxVisits?: number;
}

/** Where the lifecycle stands at `now` (disabled first, then expiry, then the visit cap). */
export function linkState(link: Pick<Link, 'disabled' | 'expires_at' | 'max_visits' | 'clicks'>, now: number): LinkState {
  if (link.disabled) return 'disabled';
  if (link.expires_at !== null && link.expires_at.getTime() <= now) return 'expired';
  if (link.max_visits !== null && link.clicks >= link.max_visits) return 'exhausted';
  return 'active';
}

/** The 410 message: why the link no longer redirects. */
export function goneMessage(state: Refusal, limits: { expires_at: Date | null; max_visits: number | null }): string {
  if (state === 'disabled') return 'This link has been disabled';
  if (state === 'expired') return `This link expired at ${limits.expires_at?.toISOString() ?? 'an earlier time'}`;
  return `This link reached its limit of ${limits.max_visits ?? 0} visit${limits.max_visits === 1 ? '' : 's'}`;
}

export const gone = (state: Refusal, limits: { expires_at: Date | null; max_visits: number | null }) =>
  new HttpError(410, goneMessage(state, limits));

export class LinkService {
  readonly clicks: ClickCounter;
  private readonly visitorKeys: VisitorKeys;
  private readonly agents = new AgentParser();

  constructor(
    private readonly repo: LinkRepository,
    private readonly generateCode: CodeGenerator,
    /** Codes that are paths of the service itself (e.g. healthz) and must never be issued. */
    private readonly isReservedCode: (code: string) => boolean,
    /** Decides expiry, visit hours and the day of the visitor salt. */
    private readonly clock: Clock,
    /** Told how many clicks each batch writes. */
    observeClickBatch: (clicks: number) => void = () => {},
  ) {
    this.visitorKeys = new VisitorKeys(repo, clock);
    this.clicks = new ClickCounter((codes, counts, visits) => {
      observeClickBatch(counts.reduce((sum, n) => sum + n, 0));
      return repo.addClicks(codes, counts, visits, new Date(clock()));
    });
  }

  /** Inserts with a fresh code, retrying only on a duplicate code (rule 2). */
  async create(originalUrl: string, limits: LinkLimits = {}): Promise<Link> {
    validateTargetUrl(originalUrl);
    if (limits.expiresAt && limits.expiresAt.getTime() <= this.clock()) throw badRequest('expires_at must be in the future');
    for (let attempt = 1; attempt <= MAX_CODE_ATTEMPTS; attempt++) {
      const code = this.generateCode();
      if (this.isReservedCode(code)) continue;
      try {
        return await this.repo.insert(code, originalUrl, limits.expiresAt ?? null, limits.maxVisits ?? null);
      } catch (err) {
        // Taken by a live link, or once held by a deleted one: either way, another code.
        if (isUniqueViolation(err, UNIQUE_CODE_CONSTRAINT) || isUniqueViolation(err, DELETED_CODE_CONSTRAINT)) continue;
        throw err;
      }
    }
    throw new HttpError(503, 'Could not allocate a unique short code, please try again', { 'retry-after': '1' });
  }

  /**
   * Counts the click and its visit, both durable before this resolves. Returns
   * where to go, why the link refused (410), or undefined for an unknown code.
   */
  async follow(code: string, visitor: VisitorRequest): Promise<ClickOutcome> {
    const visit = await this.visitorKeys.visit(visitor.ip, visitor.userAgent, visitor.referer, this.agents);
    return this.clicks.record(code, visit);
  }

  find(code: string): Promise<Link | undefined> {
    return this.repo.find(code);
  }

  now(): number {
    return this.clock();
  }

  /** The link's visits over a validated range (see visit-report.ts). */
  visits(code: string, range: VisitRange): Promise<VisitReport> {
    return visitReport(this.repo, code, range);
  }

  /**
   * Rolls up every day that ended at least VISIT_DAY_SETTLE_MS ago and is not
   * rolled up yet, one day per transaction; returns how many steps the
   * boundary moved. After that delay no visit of the day can still be on its
   * way: a visit takes its hour when its request arrives and is written within
   * the pool and statement timeouts (seconds), or not at all.
   */
  async rollUpVisits(): Promise<number> {
    const before = isoDay(this.clock() - VISIT_DAY_SETTLE_MS);
    let days = 0;
    for (let until = await this.repo.rollUpVisitDay(before); until !== undefined; until = await this.repo.rollUpVisitDay(before)) {
      days++;
      if (until >= before) break;
    }
    return days;
  }

  /** Deletes the visitor salts of past days (here and in the database), for days without any visit to do it. */
  sweepSalts(): Promise<number> {
    const today = isoDay(this.clock());
    this.visitorKeys.forgetBefore(today);
    return this.repo.deleteSaltsBefore(today);
  }
}
