import { ApiError, api, formatWait, say, waitOut } from '/assets/api.js';

// The signed-in state of the accounts pages (docs/accounts.md, "Sessions in the
// browser"). The access token lives only in this module's memory. The refresh
// token never reaches a script: the service keeps it in an HttpOnly cookie
// sent only to /auth/browser/, so every tab of this browser, and the page after
// a restart, resumes the session with one refresh. The access token is renewed
// shortly before it expires, and once more when the API refuses it (a tab the
// browser put to sleep misses its timer).

/** Sent with every call that reads the cookie: a page of another site cannot send it (docs/accounts.md). */
const CSRF = { 'x-csrf-protection': '1' };
/** Where a sign-in may send the user back to: the pages only, never a URL from elsewhere. */
const RETURN_PAGES = ['/account', '/admin'];

let access;
let user;
let sessionId;
let timer;
let refreshing;

export const currentUser = () => user;
/** This browser's session, as GET /auth/sessions lists it. */
export const currentSessionId = () => sessionId;

/** Keeps a session from sign-in, refresh or a password change, and plans the next refresh. */
function keep(session) {
  access = session.token;
  user = session.user;
  sessionId = session.session_id;
  clearTimeout(timer);
  // A fifth of the lifetime before expiry, at most a minute before, at least a second after now.
  const lifetimeMs = session.expires_in * 1000;
  const delay = Math.max(1000, lifetimeMs - Math.min(60_000, lifetimeMs / 5));
  timer = setTimeout(() => {
    refresh().catch(signedOutElsewhere);
  }, delay);
  showNavigation();
}

/** Forgets the session in this page (the cookie is the server's to clear). */
export function endSession() {
  clearTimeout(timer);
  access = undefined;
  user = undefined;
  sessionId = undefined;
  showNavigation();
}

/**
 * One refresh at a time: two callers that find the token refused share one
 * rotation. Resolves to the user, or undefined when nobody is signed in on
 * this browser (no cookie); throws the refusal of a cookie whose session is over.
 */
function refresh() {
  refreshing ??= (async () => {
    const { data } = await api('/auth/browser/refresh', { method: 'POST', headers: CSRF });
    if (!data) {
      endSession();
      return undefined;
    }
    keep(data);
    return data.user;
  })().finally(() => {
    refreshing = undefined;
  });
  return refreshing;
}

/** The session ended on the server (signed out elsewhere, password changed, banned): back to the sign-in page. */
function signedOutElsewhere(err) {
  if (err !== undefined && (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 403))) return;
  endSession();
  location.assign(`/?ended=1&next=${encodeURIComponent(location.pathname)}`);
}

/** Signs in and keeps the session (its refresh token goes into the cookie); answers the user. */
export async function signIn(email, password) {
  const { data } = await api('/auth/browser/login', { method: 'POST', body: { email, password }, headers: CSRF });
  // An account with two-step sign-in: no session yet, the challenge goes on to signInWithCode or answerWithPasskey.
  if (data.mfa_required) return secondStep(data);
  keep(data);
  return data.user;
}

/** A sign-in with a mail's link token, or its code and address; answers the user, or the challenge of a second factor. */
export async function signInByMail(body) {
  const { data } = await api('/auth/browser/email-signin', { method: 'POST', body, headers: CSRF });
  if (data.mfa_required) return secondStep(data);
  keep(data);
  return data.user;
}

/** The second step of a sign-in: a 6-digit app code, or else a recovery code. Keeps the session; answers the user. */
export async function signInWithCode(challenge, typed) {
  const code = typed.replace(/\s/g, '');
  const body = /^\d{6}$/.test(code) ? { challenge, code } : { challenge, recovery_code: typed };
  const { data } = await api('/auth/browser/login/factor', { method: 'POST', body, headers: CSRF });
  keep(data);
  return data.user;
}

/** What the second step of a sign-in needs: its challenge, what it accepts, and the passkey options when the account has passkeys. */
const secondStep = (data) => ({ challenge: data.challenge, methods: data.methods, passkey: data.passkey });

/** Whether this browser can use passkeys (WebAuthn with the JSON helpers). */
export const passkeysSupported = () =>
  typeof PublicKeyCredential !== 'undefined' && typeof PublicKeyCredential.parseRequestOptionsFromJSON === 'function';

/** The browser's passkey dialog for request options of the API; answers the credential as JSON for the API. */
async function assertWithPasskey(options) {
  const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
  return credential.toJSON();
}

/** A sign-in with a passkey alone (no email): keeps the session; answers the user. */
export async function signInWithPasskey() {
  const { data: options } = await api('/auth/passkeys/sign-in/options', { method: 'POST' });
  const response = await assertWithPasskey(options);
  const { data } = await api('/auth/browser/passkey-sign-in', { method: 'POST', body: { response }, headers: CSRF });
  keep(data);
  return data.user;
}

/** The second step of a sign-in answered with one of the account's passkeys. Keeps the session; answers the user. */
export async function answerWithPasskey(challenge, options) {
  const passkey = await assertWithPasskey(options);
  const { data } = await api('/auth/browser/login/factor', { method: 'POST', body: { challenge, passkey }, headers: CSRF });
  keep(data);
  return data.user;
}

/** Adds a passkey named `name`: the browser makes it for the API's options, the API stores it. Answers the passkey. */
export async function addPasskey(name) {
  const { data: options } = await authApi('/auth/passkeys/registration-options', { method: 'POST' });
  const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) });
  const { data } = await authApi('/auth/passkeys', { method: 'POST', body: { name, response: credential.toJSON() } });
  return data;
}

/** The browser's passkey dialog was closed, timed out or refused (not an error of the service). */
export const passkeyDialogDismissed = (err) => err instanceof DOMException && (err.name === 'NotAllowedError' || err.name === 'AbortError');

/** The refusal of a sensitive change whose sign-in is too old (REAUTH_MAX_AGE): a new sign-in is the answer, not a refresh. */
export const needsRecentSignIn = (err) => err instanceof ApiError && err.status === 401 && /^reauthentication_required/.test(err.message);

/** A password change: the answer is a new session (every other one has ended), kept like a sign-in. */
export async function changePassword(current, next) {
  const { data } = await authApi('/auth/browser/password', {
    method: 'POST',
    body: { current_password: current, new_password: next },
    headers: CSRF,
  });
  keep(data);
}

/** Signs out this browser (`everywhere`: every session of the account); the service clears the cookie. */
export async function signOut(everywhere = false) {
  try {
    await authApi('/auth/browser/logout', { method: 'POST', body: everywhere ? { scope: 'global' } : {}, headers: CSRF });
  } catch (err) {
    // Already signed out on the server: this page forgets its session all the same.
    if (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 403)) throw err;
  }
  endSession();
}

/**
 * The signed-in user, after resuming the browser's session when this page has
 * none yet; undefined when nobody is signed in on this browser.
 */
export async function resumeSession() {
  if (access) return user;
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

/**
 * Step-up: this browser signs out, and the sign-in page asks to sign in again and brings the
 * person back to this page. A sign-out that fails is told in `box`, and the page stays.
 */
export async function signInAgain(box) {
  try {
    await signOut(false);
  } catch (err) {
    return say(box, explain(err));
  }
  location.assign(`/?again=1&next=${encodeURIComponent(location.pathname)}`);
}

/** Where to go after signing in: a known page the user came from, else the admin page for an admin, the account page for anyone else. */
export function returnPage(next, signedIn) {
  if (RETURN_PAGES.includes(next)) return next;
  return signedIn?.role === 'admin' ? '/admin' : '/account';
}

/** An API call with the access token; a refused token is refreshed once and the call repeated. */
export async function authApi(path, init = {}) {
  const call = () => api(path, { ...init, token: access });
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401 || needsRecentSignIn(err)) throw err;
    let resumed;
    try {
      resumed = await refresh();
    } catch (refreshErr) {
      signedOutElsewhere(refreshErr);
      throw refreshErr;
    }
    if (!resumed) {
      signedOutElsewhere(undefined);
      throw err;
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

/** The header's links follow who is signed in: the sign-in links for nobody, the account for a user, and the admin page for an admin. */
function showNavigation() {
  const who = user === undefined ? 'signed-out' : user.role === 'admin' ? 'admin' : 'signed-in';
  for (const item of document.querySelectorAll('[data-nav]')) {
    const shownTo = item.dataset.nav.split(' ');
    item.hidden = !shownTo.includes(who);
  }
}

/**
 * A 429 of a form: its button off and the wait counted down in `box` after
 * `words` ("… You can ask again in" + "15 minutes."). True when `err` was one.
 */
export function waitOutLimit(err, button, box, words) {
  if (!(err instanceof ApiError) || err.status !== 429) return false;
  waitOut(button, err.retryAfter ?? 60, box, words);
  return true;
}

// ---- the API's words, for people ----------------------------------------------------------------

const FIELDS = {
  name: 'The name',
  email: 'The email address',
  password: 'The password',
  new_password: 'The new password',
  current_password: 'The current password',
  token: 'The link',
};

/** One problem of a field (the part after `body/<field> `), in words for a person. */
function problemInWords(field, problem) {
  const subject = FIELDS[field] ?? 'A field';
  if (/^must be a valid email address/.test(problem)) return 'Enter a valid email address, such as name@example.com.';
  const between = /^must be between (\d+) and (\d+) characters/.exec(problem);
  if (between) return `${subject} must be ${between[1]} to ${between[2]} characters long.`;
  if (/^must be at most 72 bytes/.test(problem))
    return `${subject} is too long: accents and emoji take more room, and at most 72 bytes fit. Use fewer of them, or a shorter password.`;
  if (/^is one of the most commonly used passwords/.test(problem))
    return `${subject} is one of the most commonly used passwords, the first an attacker tries. Choose one that is harder to guess: a few unrelated words work well.`;
  if (/^must not contain control characters/.test(problem)) return `${subject} holds invisible control characters. Remove them.`;
  if (/^must be valid Unicode text/.test(problem)) return `${subject} holds characters that cannot be stored. Retype it.`;
  if (/^must be string/.test(problem)) return `${subject} must be text.`;
  return `${subject} is not accepted. Check it and try again.`;
}

/**
 * The fields a 400 of the API is about, each with its problem in words:
 * `body/<field> <problem>` (several joined by "; "), or a missing property.
 */
export function fieldProblems(err) {
  const problems = {};
  if (!(err instanceof ApiError) || err.status !== 400) return problems;
  for (const part of err.message.split('; ')) {
    const field = /^body\/(\w+) (.*)$/.exec(part);
    if (field) problems[field[1]] = problemInWords(field[1], field[2]);
    const missing = /^body must have required property '(\w+)'/.exec(part);
    if (missing) problems[missing[1]] = `Enter ${(FIELDS[missing[1]] ?? 'the field').replace(/^The /, 'the ')}.`;
  }
  if (/email already exists/.test(err.message))
    problems.email = 'An account with this email address already exists. Sign in, or reset its password.';
  return problems;
}

/** Any refusal of the API in words for a person; waits read in minutes. */
export function explain(err) {
  if (!(err instanceof ApiError)) return 'Something went wrong on this page. Reload it and try again.';
  if (err.status === 0) return err.message;
  const fields = Object.values(fieldProblems(err));
  if (fields.length > 0) return fields.join(' ');
  const wait = err.retryAfter ? formatWait(err.retryAfter) : 'a while';
  if (err.status === 429) {
    if (/second-factor/i.test(err.message)) return `Too many wrong codes for this account. You can try again in ${wait}.`;
    if (/login/i.test(err.message)) return `Too many failed sign-ins for this account or from your address. You can try again in ${wait}.`;
    if (/registrations/i.test(err.message))
      return `Too many accounts were registered from your address. You can register another in ${wait}.`;
    return `Too many requests from your address. You can try again in ${wait}.`;
  }
  if (needsRecentSignIn(err))
    return 'For your security, this change needs a recent sign-in. Sign out, sign in again, and then make the change within 10 minutes.';
  if (err.status === 503) return `The service is busy just now. Try again in ${err.retryAfter ? wait : 'a moment'}.`;
  if (err.status >= 500) return 'The service could not do this just now. Try again in a moment.';
  return err.message;
}
