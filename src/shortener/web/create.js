import { ApiError, api, formatInstant, formatNumber, localToIso, say, waitOut } from '/assets/api.js';

const MAX_URL_LENGTH = 2048;
const form = document.getElementById('create-form');
const button = document.getElementById('create-button');
const errorBox = document.getElementById('create-error');
const noteBox = document.getElementById('create-note');
const waitBox = document.getElementById('create-wait');
const result = document.getElementById('result');
const shortUrl = document.getElementById('short-url');
const copyStatus = document.getElementById('copy-status');
let waiting = false;

/**
 * What a person typed, as the address the API takes: "example.com/page" gets
 * https:// in front (the form shows it). A scheme already written is left as
 * it is, for the API to accept or refuse ("localhost:8080" reads as a host and
 * port, not as a scheme).
 */
function withScheme(text) {
  if (text.startsWith('//')) return `https:${text}`;
  if (/^[a-z][a-z0-9+.-]*:(?!\d)/i.test(text)) return text;
  return `https://${text}`;
}

/** The API's refusal of a create, in words for the person who typed it; `field` is the input it is about. */
function explain(err) {
  const m = err.message;
  if (err.status === 0) return { text: m };
  if (/link of this shortener already/.test(m))
    return { text: 'This is already a short link of this service. Shorten the address it leads to instead.', field: form.url };
  if (/protocol .* is not allowed/.test(m))
    return { text: 'Only web addresses can be shortened: they start with http:// or https://.', field: form.url };
  if (/url must NOT have more than/.test(m)) return { text: tooLong(form.url.value.trim().length), field: form.url };
  if (/credentials/.test(m))
    return {
      text: 'The address holds a user name or password before the host. Remove it: the link would show one site and go to another.',
      field: form.url,
    };
  if (/tabs or line breaks/.test(m)) return { text: 'The address holds a tab or a line break. Remove it and try again.', field: form.url };
  if (/backslash/.test(m)) return { text: 'The address holds a backslash (\\) before its query. Use / instead.', field: form.url };
  if (/url host must be written/.test(m))
    return {
      text: 'The address names its host in a coded form. Write the host plainly, for example example.com or 192.0.2.10.',
      field: form.url,
    };
  if (/^(body\/)?url\b/.test(m))
    return { text: 'This is not a web address. Check it, for example https://example.com/page.', field: form.url };
  if (/expires_at must be in the future/.test(m)) return { text: 'Choose an expiry time in the future.', field: form.expires };
  if (/expires_at/.test(m)) return { text: 'The expiry is not a valid date and time.', field: form.expires };
  if (/max_visits/.test(m)) return { text: 'Maximum visits must be a whole number from 1.', field: form.max_visits };
  if (/alias .* is taken/.test(m))
    return { text: 'This back-half is taken (or was used by a deleted link). Choose another one.', field: form.alias };
  if (/alias .* is reserved/.test(m))
    return { text: 'This back-half names a page of this service. Choose another one.', field: form.alias };
  if (/alias/.test(m)) return { text: 'A back-half is 3 to 64 letters, digits, _ and -, with no spaces or dots.', field: form.alias };
  if (err.status >= 500) return { text: 'The service could not create the link just now. Try again in a moment.' };
  return { text: 'The service refused this link. Check the address and try again.', field: form.url };
}

const tooLong = (length) =>
  `This address is ${formatNumber(length)} characters long; a short link can hold at most ${formatNumber(MAX_URL_LENGTH)}. Shorten the address itself (drop tracking parameters, for example) and try again.`;

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  if (waiting) return;
  say(errorBox, '');
  say(noteBox, '');
  const typed = form.url.value.trim();
  if (!typed) return fail('Enter the address to shorten.', form.url);
  const url = withScheme(typed);
  if (url !== typed) {
    form.url.value = url;
    say(noteBox, `Added https:// in front of the address: ${url}`);
  }
  // Checked here, not cut by the field: a cut address would make a link to somewhere else.
  if (url.length > MAX_URL_LENGTH) return fail(tooLong(url.length), form.url);
  const body = { url };
  if (form.expires.value) {
    const iso = localToIso(form.expires.value);
    if (!iso) return fail('The expiry is not a valid date and time.', form.expires);
    body.expires_at = iso;
  }
  if (form.max_visits.value !== '') {
    const n = Number(form.max_visits.value);
    if (!Number.isInteger(n) || n < 1) return fail('Maximum visits must be a whole number from 1.', form.max_visits);
    body.max_visits = n;
  }
  const alias = form.alias.value.trim();
  if (alias) body.alias = alias;
  busy(true);
  try {
    const { data } = await api('/api/links', { method: 'POST', body });
    busy(false);
    show(data);
  } catch (err) {
    busy(false);
    result.hidden = true;
    if (err instanceof ApiError && err.status === 429) return wait(err.retryAfter ?? 60);
    const { text, field } = explain(err);
    fail(text, field);
  }
});

/** While a create runs: the button says so and takes no second click. */
function busy(on) {
  button.disabled = on;
  button.textContent = on ? 'Shortening…' : 'Shorten';
  form.setAttribute('aria-busy', String(on));
}

/** A refusal: told beside the form, on the input it is about, and no result of an earlier create left on screen. */
function fail(message, input) {
  result.hidden = true;
  say(errorBox, message);
  for (const i of [form.url, form.expires, form.max_visits, form.alias]) i.removeAttribute('aria-invalid');
  if (input) {
    input.setAttribute('aria-invalid', 'true');
    input.focus();
  }
}

/** After a 429: the button stays off for Retry-After seconds, counted down on the page. */
function wait(seconds) {
  waiting = true;
  waitOut(button, seconds, waitBox, 'Too many links created from your address. You can create another in', () => {
    waiting = false;
  });
}

function show(link) {
  for (const i of [form.url, form.expires, form.max_visits, form.alias]) i.removeAttribute('aria-invalid');
  // Allowed to wrap after each "/" first (a phone shows the code whole on its own line), anywhere if it must.
  shortUrl.replaceChildren(...link.short_url.split(/(?<=\/)/).flatMap((part) => [part, document.createElement('wbr')]));
  const original = document.getElementById('original-url');
  original.href = link.original_url;
  original.textContent = link.original_url;
  const limits = [];
  if (link.expires_at) limits.push(`Expires ${formatInstant(link.expires_at)}.`);
  if (link.max_visits) limits.push(`Allows ${formatNumber(link.max_visits)} visit${link.max_visits === 1 ? '' : 's'}.`);
  const limitsBox = document.getElementById('limits');
  limitsBox.textContent = limits.join(' ');
  limitsBox.hidden = limits.length === 0;
  // The token rides in the fragment: the browser never sends it to the server in a URL or a Referer.
  document.getElementById('stats-link').href = `/stats/${encodeURIComponent(link.code)}#token=${encodeURIComponent(link.manage_token)}`;
  document.getElementById('manage-token').textContent = link.manage_token;
  const qr = document.getElementById('qr');
  qr.src = `/api/links/${encodeURIComponent(link.code)}/qr`;
  qr.alt = `QR code of ${link.short_url}`;
  say(copyStatus, '');
  result.hidden = false;
  document.getElementById('result-title').focus();
}

document.getElementById('copy-button').addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(shortUrl.textContent);
    say(copyStatus, 'Copied to the clipboard.');
  } catch {
    // No clipboard access (permission, insecure context): the text is selected, to copy by hand.
    getSelection().selectAllChildren(shortUrl);
    say(copyStatus, 'Selected: press Ctrl+C (⌘C) to copy.');
  }
});
