import { ApiError, api, formatWait } from '/assets/api.js';

// The signed-in session of this browser and every call to the notes API.
//
// Where the tokens live (OWASP's advice for browser apps: nothing sensitive in
// storage a script can read):
// - the access token only in memory, in this module: a reload forgets it;
// - the refresh token in an HttpOnly cookie the service sets and only its
//   /auth/browser/ routes receive (docs/notes.md, "Sessions in the browser"):
//   no script reads it, and every tab of this browser, or the app after a
//   restart, resumes the session with one refresh.
// The access token is renewed shortly before it expires, and once more when the
// API refuses it anyway (a clock that is off, a computer that slept through the
// timer), so the user never meets an expired session while the cookie holds.

/** Sent with every call that reads the cookie: a page of another site cannot send it. */
const CSRF = { 'x-csrf-protection': '1' };
/** Renewed this long before expiry (at most half the token's lifetime). */
const REFRESH_LEAD_MS = 60_000;
/** A token this close to its expiry is renewed before a call rather than sent. */
const EXPIRY_MARGIN_MS = 5_000;
/** After a background refresh fails for a passing reason (outage, no network), the next try. */
const RETRY_MS = 15_000;

/** The session is over (refused refresh token, or none): the user must sign in again. */
export class SessionEnded extends ApiError {
  constructor() {
    super(401, 'Your session has ended. Sign in again.');
  }
}

/** { token, expiresAt } (milliseconds), or undefined when signed out or not yet resumed. */
let access;
let timer;
/** The refresh in flight: concurrent callers share it, since each refresh token works once. */
let refreshing;
const endedListeners = [];

/**
 * One request to the notes API, whose bodies come without an envelope: `body`
 * goes as JSON, `token` as the bearer. Answers `{ data, headers }` for a 2xx;
 * throws ApiError otherwise (status 0 when unreachable).
 */
export function request(path, options = {}) {
  return api(path, { ...options, bare: true });
}

/** A call as the signed-in user, with a token renewed when needed. Throws SessionEnded when there is no session left. */
export async function authorized(path, init = {}) {
  const token = await currentToken();
  try {
    return await request(path, { ...init, token });
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) throw err;
    // Refused although it looked valid here: renew once and try again.
    return request(path, { ...init, token: await refresh(token) });
  }
}

async function currentToken() {
  if (access && access.expiresAt - Date.now() > EXPIRY_MARGIN_MS) return access.token;
  return refresh(access?.token);
}

/**
 * Trades the cookie's refresh token for a new session. `stale`: the access
 * token the caller found wanting; when another call renewed it meanwhile, that one is used.
 */
function refresh(stale) {
  if (refreshing) return refreshing;
  if (access && stale !== undefined && access.token !== stale && access.expiresAt - Date.now() > EXPIRY_MARGIN_MS)
    return Promise.resolve(access.token);
  refreshing = (async () => {
    let data;
    try {
      ({ data } = await request('/auth/browser/refresh', { method: 'POST', headers: CSRF }));
    } catch (err) {
      // Refused (revoked, used, unknown): the session is over. An outage or a 429 leaves it for another try.
      if (err instanceof ApiError && (err.status === 400 || err.status === 401)) throw end();
      throw err;
    }
    // No cookie: nobody is signed in on this browser.
    if (!data) throw end();
    keep(data);
    return data.access_token;
  })().finally(() => {
    refreshing = undefined;
  });
  return refreshing;
}

/** Keeps a session answered by sign-in or refresh, and plans its renewal. */
function keep(session) {
  access = { token: session.access_token, expiresAt: session.expires_at * 1000 };
  plan(Math.max(0, access.expiresAt - Date.now() - Math.min(REFRESH_LEAD_MS, (access.expiresAt - Date.now()) / 2)));
}

function plan(delay) {
  clearTimeout(timer);
  timer = setTimeout(() => {
    refresh(access?.token).catch((err) => {
      if (!(err instanceof SessionEnded)) plan(RETRY_MS);
    });
  }, delay);
}

function forget() {
  access = undefined;
  clearTimeout(timer);
}

/** Forgets the session and, when there was one in this page, tells it; answers the error to throw. */
function end() {
  const ended = new SessionEnded();
  const hadSession = access !== undefined;
  forget();
  if (hadSession) for (const listener of endedListeners) listener(ended);
  return ended;
}

/** `listener(error)` runs when the session ends without the user signing out (its refresh token refused). */
export function onSessionEnded(listener) {
  endedListeners.push(listener);
}

export async function signIn(email, password) {
  const { data } = await request('/auth/browser/login', { method: 'POST', body: { email, password }, headers: CSRF });
  keep(data);
}

export async function register(email, password) {
  await request('/auth/register', { method: 'POST', body: { email, password } });
}

/** Ends the session at the provider (its refresh token stops working, the cookie is cleared) and here, even when the provider cannot be told. */
export async function signOut() {
  try {
    const token = await currentToken();
    await request('/auth/browser/logout', { method: 'POST', token, headers: CSRF });
  } catch {
    // Ended already, or the provider unreachable: this page forgets the session all the same.
  }
  forget();
}

/** As the app opens: true when this browser's cookie still gives a session, false when there is none (or it was refused). */
export async function resume() {
  if (access) return true;
  try {
    await refresh();
    return true;
  } catch (err) {
    if (err instanceof SessionEnded) return false;
    throw err;
  }
}

/** The claims of an access token, decoded for display only (the server checks the token); {} when unreadable. */
export function tokenClaims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const bytes = Uint8Array.from(atob(part), (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes)) ?? {};
  } catch {
    return {};
  }
}

/** The signed-in user's address, from the access token's claims. */
export function signedInEmail() {
  return access ? tokenClaims(access.token).email : undefined;
}

/** A refusal of the API in words for a person: what to do, and waits in minutes. */
export function explain(err) {
  if (!(err instanceof ApiError)) return 'Something went wrong on this page. Reload it and try again.';
  const m = err.message;
  if (err.status === 0 || err instanceof SessionEnded) return m;
  if (err.status === 429)
    return `Too many attempts from your address. You can try again in ${err.retryAfter ? formatWait(err.retryAfter) : 'a minute'}.`;
  if (err.status === 503 || /unavailable/i.test(m)) return 'The sign-in service cannot be reached just now. Try again in a moment.';
  if (/title must NOT have more than/.test(m)) return 'The title is longer than 200 characters.';
  if (/body must NOT have more than/.test(m)) return 'The text is longer than 10,000 characters.';
  if (/email and password are required/.test(m)) return 'Enter your email address and a password.';
  if (err.status === 400 && /email/i.test(m) && /valid email|invalid format|must be a valid/i.test(m))
    return 'Enter a valid email address, such as name@example.com.';
  if (err.status === 404) return 'This note no longer exists: it may have been deleted in another tab.';
  if (err.status >= 500) return 'The service could not do this just now. Try again in a moment.';
  return m;
}
