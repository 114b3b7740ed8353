// Shared by the services' pages: calls to the service's own JSON API, and
// building DOM nodes without innerHTML (text is always set as text).

/** A refusal of the API: its status, its envelope's message, and Retry-After in seconds when sent. */
export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

/**
 * Calls the API: `body` goes as JSON, `token` (when given) as the bearer;
 * answers `{ data, headers }` for a 2xx and throws ApiError otherwise (a network
 * failure too, as status 0). `data` is the envelope's `data`, or with
 * `bare: true` the whole body (the notes API answers without an envelope);
 * either way a refusal's text is the body's `message`.
 */
export async function api(path, { method = 'GET', body, headers = {}, token, bare = false } = {}) {
  const init = { method, headers: { accept: 'application/json', ...headers } };
  if (token) init.headers.authorization = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch {
    throw new ApiError(0, 'The service could not be reached. Check your connection and try again.');
  }
  let parsed;
  try {
    parsed = res.status === 204 ? undefined : await res.json();
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const retry = Number(res.headers.get('retry-after'));
    throw new ApiError(
      res.status,
      parsed?.message ?? `The service answered ${res.status}`,
      Number.isFinite(retry) && retry > 0 ? retry : undefined,
    );
  }
  return { data: bare ? parsed : parsed?.data, headers: res.headers };
}

/** el('a', { href: '/x', class: 'btn' }, 'text', child): attributes set one by one, children as text or nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  node.append(
    ...children
      .flat()
      .filter((c) => c !== undefined && c !== null && c !== false)
      .map((c) => (c instanceof Node ? c : String(c))),
  );
  return node;
}

/** A datetime-local value ("2026-12-31T23:59") as an ISO 8601 timestamp with this browser's offset at that date. */
export function localToIso(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return undefined;
  const offset = -date.getTimezoneOffset();
  const sign = offset >= 0 ? '+' : '-';
  const pad = (n) => String(Math.trunc(Math.abs(n))).padStart(2, '0');
  const seconds = value.length === 16 ? ':00' : '';
  return `${value}${seconds}${sign}${pad(offset / 60)}:${pad(offset % 60)}`;
}

/** An ISO instant as the value of a datetime-local input, in this browser's time zone. */
export function isoToLocal(iso) {
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** An ISO instant for people: date and time in this browser's locale and zone. */
export function formatInstant(iso) {
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export const formatNumber = (n) => Number(n).toLocaleString();

/**
 * The last page of a listing of `total` rows, kept in `state.last`. A page past it (the last
 * page emptied by a delete, or in another tab) moves `state.page` there and answers false: the
 * caller loads again.
 */
export function settlePage(state, total, perPage) {
  state.last = Math.max(1, Math.ceil(total / perPage));
  if (state.page > state.last && total > 0) {
    state.page = state.last;
    return false;
  }
  return true;
}

/** Shows `message` in a live status element (role="status" or "alert"), or hides it when empty. */
export function say(node, message) {
  node.textContent = message ?? '';
  node.hidden = !message;
}

/** A wait in words for people: "42 seconds", "15 minutes", "2 hours and 5 minutes" (rounded up to the minute past one minute). */
export function formatWait(seconds) {
  const s = Math.max(1, Math.ceil(seconds));
  if (s < 60) return `${s} second${s === 1 ? '' : 's'}`;
  const minutes = Math.ceil(s / 60);
  if (minutes < 60) return `${minutes} minute${minutes === 1 ? '' : 's'}`;
  const hours = Math.floor(minutes / 60);
  const rest = minutes % 60;
  const h = `${hours} hour${hours === 1 ? '' : 's'}`;
  return rest === 0 ? h : `${h} and ${rest} minute${rest === 1 ? '' : 's'}`;
}

/**
 * Keeps a button off while a limit holds: `tell(words)` shows the wait left in
 * words whenever they change (a live region is not re-read every second), then
 * the button comes back and `done()` runs. Answers a function that ends the
 * countdown early.
 */
export function countDown(button, seconds, tell, done = () => {}) {
  let left = Math.max(1, Math.ceil(seconds));
  let said = formatWait(left);
  button.disabled = true;
  tell(said);
  const timer = setInterval(() => {
    left -= 1;
    if (left <= 0) return stop();
    const words = formatWait(left);
    if (words === said) return;
    said = words;
    tell(words);
  }, 1000);
  function stop() {
    clearInterval(timer);
    button.disabled = false;
    done();
  }
  return stop;
}

/**
 * countDown told in `box` after `words` ("… You can ask again in" + "15 minutes."):
 * the box is emptied when the button comes back, then `done()` runs.
 */
export function waitOut(button, seconds, box, words, done = () => {}) {
  countDown(
    button,
    seconds,
    (wait) => say(box, `${words} ${wait}.`),
    () => {
      say(box, '');
      done();
    },
  );
}
