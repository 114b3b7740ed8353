// The error bodies each service documents, checked strictly: a hostile request may be refused,
// but always in the service's own envelope, never with a stack, a SQL message in the wrong place
// or a body of some other shape.

export type ServiceName = 'shortener' | 'accounts' | 'notes' | 'idp';

export type BodyVerdict = { ok: true; kind: 'envelope' | 'framework' | 'no-body' | 'success' | 'page' } | { ok: false; problem: string };

const keysOf = (o: Record<string, unknown>) => Object.keys(o).sort().join(',');
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown) => typeof v === 'string';
const strOrNull = (v: unknown) => v === null || typeof v === 'string';

/** `{status, response, message}` with status equal to the HTTP status (accounts, shortener). */
function statusEnvelope(body: Record<string, unknown>, status: number): string | undefined {
  if (keysOf(body) !== 'message,response,status') return `not {status, response, message}: keys ${keysOf(body)}`;
  if (body.status !== status) return `envelope status ${String(body.status)} differs from HTTP ${status}`;
  if (!str(body.response) || !str(body.message)) return 'response and message must be strings';
  return undefined;
}

/** `{message}` only (notes; the idp outside its two APIs). */
function messageOnly(body: Record<string, unknown>): string | undefined {
  return keysOf(body) === 'message' && str(body.message) ? undefined : `not {message}: keys ${keysOf(body)}`;
}

/** The gateway's 401: `{message, hint}`. */
const isGateway = (body: Record<string, unknown>) => keysOf(body) === 'hint,message' && str(body.message) && str(body.hint);

/** Supabase Auth: versioned `{code, message, ...}`, legacy `{code, error_code, msg, ...}` or OAuth `{error, error_description}`. */
function isAuthError(body: Record<string, unknown>, status: number): boolean {
  const extra = Object.keys(body).filter((k) => !['code', 'message', 'error_code', 'msg', 'weak_password'].includes(k));
  if (str(body.code) && str(body.message) && body.error_code === undefined && extra.length === 0) return true;
  if (body.code === status && str(body.error_code) && str(body.msg) && extra.length === 0) return true;
  return keysOf(body) === 'error,error_description' && str(body.error) && str(body.error_description);
}

/** PostgREST: all four keys, always. */
const isRestError = (body: Record<string, unknown>) =>
  keysOf(body) === 'code,details,hint,message' && str(body.code) && str(body.message) && strOrNull(body.details) && strOrNull(body.hint);

/** A stack trace or a Node internal path: never part of any answer. */
const LEAKS = /\n\s+at |node:internal\/|\.ts:\d+:\d+/;

export function checkResponseBody(
  service: ServiceName,
  path: string,
  status: number,
  contentType: string | undefined,
  text: string,
  method: string,
): BodyVerdict {
  if (method === 'HEAD' || status === 204 || status === 304 || (status >= 300 && status < 400 && text === '')) {
    return { ok: true, kind: 'no-body' };
  }
  const isJson = /json/i.test(contentType ?? '');
  if (status < 400) {
    if (!isJson) return { ok: true, kind: 'success' };
    try {
      JSON.parse(text);
      return { ok: true, kind: 'success' };
    } catch {
      return { ok: false, problem: `a ${status} says JSON but its body does not parse: ${text.slice(0, 120)}` };
    }
  }
  // The shortener's HTML errors, for a browser (Accept naming text/html): the stats page of an
  // unknown code is its "Link not found" page (404), and a short link that leads nowhere answers
  // the page saying why, 404 or 410 (docs/shortener.md, Web pages), to a GET and to the POST of a
  // password form (a browser whose form outlived its link). Any other HTML error is wrong.
  if (
    service === 'shortener' &&
    (status === 404 || status === 410) &&
    (method === 'GET' || method === 'POST') &&
    /^text\/html/i.test(contentType ?? '')
  ) {
    const title = /<title>([^<]*)<\/title>/.exec(text)?.[1];
    const pages = status === 404 ? ['Link not found'] : path.startsWith('/stats/') ? [] : ['Link disabled', 'Link expired', 'Link used up'];
    return title !== undefined && pages.includes(title) && !path.startsWith('/api/') && !LEAKS.test(text)
      ? { ok: true, kind: 'page' }
      : { ok: false, problem: `a ${status} page that is not a dead-link page: ${text.slice(0, 120)}` };
  }
  if (!isJson) return { ok: false, problem: `a ${status} is not JSON (content-type ${contentType ?? 'none'}): ${text.slice(0, 120)}` };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, problem: `a ${status} body does not parse as JSON: ${text.slice(0, 120)}` };
  }
  if (!isObject(body)) return { ok: false, problem: `a ${status} body is not an object: ${text.slice(0, 120)}` };
  if (Object.values(body).some((v) => typeof v === 'string' && LEAKS.test(v))) {
    return { ok: false, problem: `a ${status} body leaks internals: ${text.slice(0, 200)}` };
  }

  let problem: string | undefined;
  switch (service) {
    case 'shortener':
    case 'accounts':
      problem = statusEnvelope(body, status);
      break;
    case 'notes':
      problem = messageOnly(body);
      break;
    case 'idp': {
      const area = path.includes('/rest/v1') ? 'rest' : path.includes('/auth/v1') ? 'auth' : 'other';
      const fits =
        messageOnly(body) === undefined ||
        isGateway(body) ||
        (area === 'auth' && isAuthError(body, status)) ||
        (area === 'rest' && isRestError(body));
      problem = fits ? undefined : `not an idp ${area} error body: ${text.slice(0, 160)}`;
      break;
    }
  }
  return problem === undefined ? { ok: true, kind: 'envelope' } : { ok: false, problem: `${problem} (${status})` };
}
