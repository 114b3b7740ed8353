import { ApiError, api } from '/assets/api.js';

// The signed-in state of the accounts pages (docs/accounts.md, "Token storage
// in the pages"): the access token lives only in this module's memory, the
// refresh token in this tab's sessionStorage. A reload in the same tab trades
// the refresh token for a new pair; closing the tab forgets both. The access
// token is refreshed shortly before it expires, and once more when the API
// refuses it (a tab the browser put to sleep misses its timer).

const REFRESH_KEY = 'accounts-refresh-token';
/** Where a sign-in may send the user back to: the pages only, never a URL from elsewhere. */
const RETURN_PAGES = ['/account', '/admin'];

let access;
let user;
let timer;
let refreshing;

export const refreshToken = () => sessionStorage.getItem(REFRESH_KEY);
export const currentUser = () => user;

/** Keeps a pair from login, refresh or a password change, and plans the next refresh. */
export function startSession(pair) {
  access = pair.token;
  user = pair.user;
  sessionStorage.setItem(REFRESH_KEY, pair.refresh_token);
  clearTimeout(timer);
  // A fifth of the lifetime before expiry, at most a minute before, at least a second after now.
  const lifetimeMs = pair.expires_in * 1000;
  const delay = Math.max(1000, lifetimeMs - Math.min(60_000, lifetimeMs / 5));
  timer = setTimeout(() => {
    refresh().catch(signedOutElsewhere);
  }, delay);
}

/** Forgets both tokens (the server side is the caller's business). */
export function endSession() {
  clearTimeout(timer);
  access = undefined;
  user = undefined;
  sessionStorage.removeItem(REFRESH_KEY);
}

/** One refresh at a time: two callers that find the token refused share one rotation. */
function refresh() {
  refreshing ??= (async () => {
    const token = refreshToken();
    if (!token) throw new ApiError(401, 'You are not signed in.');
    const { data } = await api('/auth/refresh', { method: 'POST', body: { refresh_token: token } });
    startSession(data);
    return data.user;
  })().finally(() => {
    refreshing = undefined;
  });
  return refreshing;
}

/** The session ended on the server (signed out elsewhere, password changed, banned): back to the sign-in page. */
function signedOutElsewhere(err) {
  if (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 403)) return;
  endSession();
  location.assign(`/?ended=1&next=${encodeURIComponent(location.pathname)}`);
}

/**
 * The signed-in user, after trading the stored refresh token for a pair when
 * this page has none yet; undefined when nobody is signed in in this tab.
 */
export async function resumeSession() {
  if (access) return user;
  if (!refreshToken()) return undefined;
  try {
    return await refresh();
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
      endSession();
      return undefined;
    }
    throw err;
  }
}

/** The signed-in user, or a trip to the sign-in page that comes back here afterwards. */
export async function requireSignIn() {
  const signedIn = await resumeSession();
  if (!signedIn) location.assign(`/?next=${encodeURIComponent(location.pathname)}`);
  return signedIn;
}

/** A page of this service to return to after signing in: one of the known pages, else the account page. */
export function returnPage(next) {
  return RETURN_PAGES.includes(next) ? next : '/account';
}

/** An API call with the access token; a refused token is refreshed once and the call repeated. */
export async function authApi(path, init = {}) {
  const call = () => api(path, { ...init, token: access });
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) throw err;
    try {
      await refresh();
    } catch (refreshErr) {
      signedOutElsewhere(refreshErr);
      throw refreshErr;
    }
    return call();
  }
}

/**
 * A page of an admin listing (`/admin/users`, `/admin/audit`): a bare JSON
 * array rather than an envelope, and its total in X-Total-Count.
 */
export async function authListing(path) {
  const { data, headers } = await authApi(path, { bare: true });
  if (!Array.isArray(data)) throw new ApiError(500, 'The service answered without a list');
  return { rows: data, total: Number(headers.get('x-total-count') ?? data.length) };
}

/** An API message for people: `body/new_password must …` becomes `The new password must …`. */
export function readable(message) {
  const fields = { name: 'The name', email: 'The email', password: 'The password', new_password: 'The new password', current_password: 'The current password' };
  return String(message).replace(/^body\/(\w+)/, (whole, field) => fields[field] ?? whole);
}
