import { isUniqueViolation } from '../kit/db.js';
import { HttpError, badRequest } from '../kit/errors.js';
import { ClickCounter } from './click-counter.js';
import { CODE_PATTERN, type CodeGenerator } from './codes.js';
import { type Link, type LinkRepository, UNIQUE_CODE_CONSTRAINT } from './repository.js';

export const MAX_CODE_ATTEMPTS = 5;
export const MAX_URL_LENGTH = 2048;
const ALLOWED_PROTOCOLS = new Set(['http:', 'https:']);

// Text that parses as a URL but cannot be stored as given: PostgreSQL text holds
// no U+0000 (the insert failed with a 500), and a lone surrogate would come back
// as U+FFFD, a different URL from the one submitted.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Rule 1 beyond what the schema checks: the text parses as a URL with an allowed protocol. */
export function validateTargetUrl(raw: string): void {
  if (UNSTORABLE.test(raw)) throw badRequest('url must not contain U+0000 or unpaired surrogates');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest('url must be a valid absolute URL');
  }
  if (!ALLOWED_PROTOCOLS.has(url.protocol)) {
    throw badRequest(`url protocol "${url.protocol}" is not allowed: only http and https`);
  }
}

/** Well-formed codes only reach the database (rule 4). */
export const isWellFormedCode = (code: string) => CODE_PATTERN.test(code);

export class LinkService {
  readonly clicks: ClickCounter;

  constructor(
    private readonly repo: LinkRepository,
    private readonly generateCode: CodeGenerator,
    /** Codes that are paths of the service itself (e.g. healthz) and must never be issued. */
    private readonly isReservedCode: (code: string) => boolean,
    /** Told how many clicks each batch writes. */
    observeClickBatch: (clicks: number) => void = () => {},
  ) {
    this.clicks = new ClickCounter((codes, counts) => {
      observeClickBatch(counts.reduce((sum, n) => sum + n, 0));
      return repo.addClicks(codes, counts);
    });
  }

  /** Inserts with a fresh code, retrying only on a duplicate code (rule 2). */
  async create(originalUrl: string): Promise<Link> {
    validateTargetUrl(originalUrl);
    for (let attempt = 1; attempt <= MAX_CODE_ATTEMPTS; attempt++) {
      const code = this.generateCode();
      if (this.isReservedCode(code)) continue;
      try {
        return await this.repo.insert(code, originalUrl);
      } catch (err) {
        if (isUniqueViolation(err, UNIQUE_CODE_CONSTRAINT)) continue;
        throw err;
      }
    }
    throw new HttpError(503, 'Could not allocate a unique short code, please try again', { 'retry-after': '1' });
  }

  /** Counts the click and returns where to go, or undefined for an unknown code. */
  follow(code: string): Promise<string | undefined> {
    return this.clicks.record(code);
  }

  find(code: string): Promise<Link | undefined> {
    return this.repo.find(code);
  }
}
