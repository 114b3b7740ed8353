import { isUniqueViolation } from '../kit/db.js';
import { HttpError, badRequest } from '../kit/http/errors.js';
import type { Clock } from '../kit/clock.js';
import { ClickCounter, type ClickOutcome } from './click-counter.js';
import { type CodeGenerator, LINK_CODE_PATTERN } from './codes.js';
import { newManageToken } from './access.js';
import {
  DELETED_CODE_CONSTRAINT,
  type Link,
  type LinkRepository,
  type NewLinkFields,
  type Refusal,
  UNIQUE_CODE_CONSTRAINT,
} from './repository.js';
import { type VisitRange, type VisitReport, visitReport } from './visit-report.js';
import { AgentParser, VisitorKeys, isoDay } from './visits.js';
import { chooseDestination, type LinkRules } from './link-rules.js';
import { validateTargetUrl } from './target-urls.js';

export const MAX_CODE_ATTEMPTS = 5;
/** How long after its end a day's visits are rolled up into daily rows. */
export const VISIT_DAY_SETTLE_MS = 60 * 60_000;
/** The largest max_visits accepted (any real cap is far below; it keeps the number exact in JSON). */
export const MAX_VISITS_LIMIT = 1_000_000_000_000;
/** Well-formed codes only reach the database (rule 4): a generated code or a chosen one. */
export const isWellFormedCode = (code: string) => LINK_CODE_PATTERN.test(code);

export const MAX_TAGS = 10;
const TAG = /^[a-z0-9][a-z0-9_-]{0,31}$/;
export const TAGS_RULE = `tags must be a list of at most ${MAX_TAGS} tags, each 1 to 32 of a-z, 0-9, _ and - (upper case is lowered)`;

/** Tags as stored: lower case, each checked, duplicates dropped, in the order given. */
export function normaliseTags(value: unknown): string[] {
  if (!Array.isArray(value) || value.length > MAX_TAGS) throw badRequest(`body/${TAGS_RULE}`);
  const tags = value.map((t) => (typeof t === 'string' ? t.trim().toLowerCase() : ''));
  if (!tags.every((t) => TAG.test(t))) throw badRequest(`body/${TAGS_RULE}`);
  return [...new Set(tags)];
}

export const ALIAS_RULE = 'alias must be 3 to 64 characters of letters A-Z and a-z, digits, "_" and "-"';

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
  /** The API key that creates the link, which then manages it. */
  ownerKeyId?: number;
  title?: string;
  /** A code chosen by the creator instead of a generated one. */
  alias?: string;
  tags?: string[];
  /** Device rules and an A/B split (link-rules.ts), already checked. */
  rules?: LinkRules | null;
  /** bcrypt hash of the link's password, already made. */
  passwordHash?: string;
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

const aliasTaken = (alias: string) =>
  new HttpError(409, `alias "${alias}" is taken: choose another (codes of deleted links are never reused)`);

const noCodeLeft = () => new HttpError(503, 'Could not allocate a unique short code, please try again', { 'retry-after': '1' });

export class LinkService {
  readonly clicks: ClickCounter;
  /** Clicks whose link password was verified: the only ones a protected link counts. */
  readonly unlockedClicks: ClickCounter;
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
    const counter = (unlocked: boolean) =>
      new ClickCounter((codes, counts, visits) => {
        observeClickBatch(counts.reduce((sum, n) => sum + n, 0));
        return repo.addClicks(codes, counts, visits, new Date(clock()), unlocked);
      });
    this.clicks = counter(false);
    // A batch of its own, so one statement never mixes clicks that may count on a protected link
    // with clicks that may not; both lock rows in code order, so they cannot deadlock each other.
    this.unlockedClicks = counter(true);
  }

  /**
   * Inserts with a fresh code, retrying only on a duplicate code (rule 2).
   * Returns the link and its manage token, which exists nowhere else: only its digest is stored.
   */
  async create(originalUrl: string, limits: LinkLimits = {}): Promise<{ link: Link; manageToken: string }> {
    this.check(originalUrl, limits);
    const manage = newManageToken();
    if (limits.alias !== undefined) {
      const { alias, ...fields } = limits;
      try {
        return { link: await this.repo.insert(alias, originalUrl, { ...fields, manageTokenHash: manage.hash }), manageToken: manage.token };
      } catch (err) {
        // One namespace with generated and deleted codes: the primary key and the tombstones decide, race-free.
        if (isUniqueViolation(err, UNIQUE_CODE_CONSTRAINT) || isUniqueViolation(err, DELETED_CODE_CONSTRAINT)) throw aliasTaken(alias);
        throw err;
      }
    }
    for (let attempt = 1; attempt <= MAX_CODE_ATTEMPTS; attempt++) {
      const code = this.generateCode();
      if (this.isReservedCode(code)) continue;
      try {
        const fields = { ...limits, manageTokenHash: manage.hash };
        return { link: await this.repo.insert(code, originalUrl, fields), manageToken: manage.token };
      } catch (err) {
        // Taken by a live link, or once held by a deleted one: either way, another code.
        if (isUniqueViolation(err, UNIQUE_CODE_CONSTRAINT) || isUniqueViolation(err, DELETED_CODE_CONSTRAINT)) continue;
        throw err;
      }
    }
    throw noCodeLeft();
  }

  /** What a create refuses before any insert: rule 1 and its URL rules, an expiry not in the future, a malformed or reserved alias. */
  private check(originalUrl: string, limits: LinkLimits): void {
    validateTargetUrl(originalUrl);
    if (limits.expiresAt && limits.expiresAt.getTime() <= this.clock()) throw badRequest('expires_at must be in the future');
    if (limits.alias !== undefined) {
      if (!isWellFormedCode(limits.alias)) throw badRequest(ALIAS_RULE);
      if (this.isReservedCode(limits.alias)) throw badRequest(`alias "${limits.alias}" is reserved: it names a page of this service`);
    }
  }

  /**
   * Creates many links with the single create's rules and answers, each on its own: a refused one
   * (its HttpError, as create() would throw it) does not keep the others from being created. All
   * rows go in one INSERT; only codes that turn out taken are drawn again and go in another, each
   * item at most MAX_CODE_ATTEMPTS times, as in create(). An alias taken by a live or deleted link,
   * or by an earlier item of the same batch, is a 409. Every link returned is durable.
   */
  async createMany(requests: Array<{ url: string; limits: LinkLimits }>): Promise<Array<{ link: Link; manageToken: string } | HttpError>> {
    const results: Array<{ link: Link; manageToken: string } | HttpError | undefined> = new Array(requests.length);
    const pending: Array<{ index: number; code: string; attempts: number; token: string; fields: NewLinkFields }> = [];
    const inBatch = new Set<string>();
    // A generated code not reserved and not already used by this batch; undefined once the attempts are spent.
    const draw = (item: { attempts: number }): string | undefined => {
      while (item.attempts < MAX_CODE_ATTEMPTS) {
        item.attempts++;
        const code = this.generateCode();
        if (!this.isReservedCode(code) && !inBatch.has(code)) return code;
      }
      return undefined;
    };
    requests.forEach(({ url, limits }, index) => {
      try {
        this.check(url, limits);
      } catch (err) {
        if (!(err instanceof HttpError)) throw err;
        results[index] = err;
        return;
      }
      const { alias, ...rest } = limits;
      const manage = newManageToken();
      const item = { index, code: alias ?? '', attempts: 0, token: manage.token, fields: { ...rest, manageTokenHash: manage.hash } };
      if (alias !== undefined && inBatch.has(alias)) {
        results[index] = aliasTaken(alias);
        return;
      }
      const code = alias ?? draw(item);
      if (code === undefined) {
        results[index] = noCodeLeft();
        return;
      }
      item.code = code;
      inBatch.add(code);
      pending.push(item);
    });
    const urls = requests.map((r) => r.url);
    let tombstoneRaces = 0;
    while (pending.length > 0) {
      let inserted: Link[];
      try {
        inserted = await this.repo.insertMany(pending.map((p) => ({ code: p.code, originalUrl: urls[p.index]!, fields: p.fields })));
      } catch (err) {
        // A delete committed a tombstone of one of these codes during the statement: nothing was
        // inserted, and the next run's NOT EXISTS sees it.
        if (isUniqueViolation(err, DELETED_CODE_CONSTRAINT) && ++tombstoneRaces <= MAX_CODE_ATTEMPTS) continue;
        throw err;
      }
      const byCode = new Map(inserted.map((link) => [link.code, link]));
      const retry: typeof pending = [];
      for (const item of pending) {
        const link = byCode.get(item.code);
        if (link) results[item.index] = { link, manageToken: item.token };
        else if (requests[item.index]!.limits.alias !== undefined) results[item.index] = aliasTaken(item.code);
        else {
          const code = draw(item);
          if (code === undefined) results[item.index] = noCodeLeft();
          else {
            inBatch.add(code);
            retry.push({ ...item, code });
          }
        }
      }
      pending.splice(0, pending.length, ...retry);
    }
    return results as Array<{ link: Link; manageToken: string } | HttpError>;
  }

  /**
   * Counts the click and its visit, both durable before this resolves. Returns
   * where to go, why the link refused (410, or `password` for a protected link), or undefined
   * for an unknown code. `unlocked`: the visitor's password for this link was just verified.
   */
  async follow(code: string, visitor: VisitorRequest, unlocked = false): Promise<ClickOutcome> {
    const visit = await this.visitorKeys.visit(visitor.ip, visitor.userAgent, visitor.referer, this.agents);
    const outcome = await (unlocked ? this.unlockedClicks : this.clicks).record(code, visit);
    // The rules came with the row the click statement locked: choosing costs no query.
    if (outcome?.counted) return { ...outcome, url: chooseDestination(outcome.url, outcome.rules, visit) };
    return outcome;
  }

  /** Where a visitor with this User-Agent goes by the link's rules (HEAD, which counts nothing). */
  destination(link: Pick<Link, 'original_url' | 'rules'>, userAgent: string | undefined): string {
    return chooseDestination(link.original_url, link.rules, this.agents.families(userAgent));
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
