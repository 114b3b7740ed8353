// One JSON-over-fetch client for the tests that talk to a service on real HTTP: one reply shape
// for every service, the idp's gateway headers added by idpRequest.

/** The Authorization header of a bearer token. */
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

export interface JsonReply {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON; undefined when empty or not JSON. */
  body: any;
}

export interface RequestOptions {
  /** Sent as JSON (unless `raw` is given). */
  body?: unknown;
  /** Sent as is, with content-type application/json unless the headers say otherwise. */
  raw?: string;
  headers?: Record<string, string>;
  /** Becomes `Authorization: Bearer <token>`. */
  token?: string;
  /** Redirects are answers under test, so they are not followed unless asked. */
  redirect?: RequestRedirect;
}

/** One request with fetch. */
export async function request(baseUrl: string, method: string, path: string, opts: RequestOptions = {}): Promise<JsonReply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  const payload = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  if (payload !== undefined && headers['content-type'] === undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body: payload, redirect: opts.redirect ?? 'manual' });
  const text = await res.text();
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** Requests to the idp with its gateway headers; `apikey` defaults to the publishable key (null: none). */
export function idpRequest(
  idp: { url: string; publishableKey: string },
  method: string,
  path: string,
  opts: RequestOptions & { apikey?: string | null } = {},
): Promise<JsonReply> {
  const apikey = opts.apikey === undefined ? idp.publishableKey : opts.apikey;
  const headers: Record<string, string> = { 'x-supabase-api-version': '2024-01-01', ...opts.headers };
  if (apikey !== null) headers.apikey = apikey;
  return request(idp.url, method, path, { ...opts, headers });
}
