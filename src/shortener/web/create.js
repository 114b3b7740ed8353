import { ApiError, api, formatInstant, localToIso, say } from '/assets/api.js';

const form = document.getElementById('create-form');
const button = document.getElementById('create-button');
const errorBox = document.getElementById('create-error');
const waitBox = document.getElementById('create-wait');
const result = document.getElementById('result');
const shortUrl = document.getElementById('short-url');
const copyStatus = document.getElementById('copy-status');
let countdown;

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  if (button.disabled) return;
  say(errorBox, '');
  const body = { url: form.url.value.trim() };
  if (form.expires.value) {
    const iso = localToIso(form.expires.value);
    if (!iso) return fail('Expires is not a valid date and time.', form.expires);
    body.expires_at = iso;
  }
  if (form.max_visits.value !== '') {
    const n = Number(form.max_visits.value);
    if (!Number.isInteger(n) || n < 1) return fail('Maximum visits must be a whole number from 1.', form.max_visits);
    body.max_visits = n;
  }
  button.disabled = true;
  try {
    const { data } = await api('/api/links', { method: 'POST', body });
    button.disabled = false;
    show(data);
  } catch (err) {
    if (err instanceof ApiError && err.status === 429) return wait(err.retryAfter ?? 60);
    button.disabled = false;
    fail(err.message, err.status === 400 ? fieldOf(err.message) : undefined);
  }
});

/** The input a 400's message names (`url …`, `expires_at …`, `body/max_visits …`). */
function fieldOf(message) {
  if (/expires_at/.test(message)) return form.expires;
  if (/max_visits/.test(message)) return form.max_visits;
  return form.url;
}

function fail(message, input) {
  say(errorBox, message);
  for (const i of [form.url, form.expires, form.max_visits]) i.removeAttribute('aria-invalid');
  if (input) {
    input.setAttribute('aria-invalid', 'true');
    input.focus();
  }
}

/** After a 429: the button stays off for Retry-After seconds, counted down on the page. */
function wait(seconds) {
  clearInterval(countdown);
  let left = Math.ceil(seconds);
  const tell = () => say(waitBox, `Too many links created from your address. You can create another in ${left} second${left === 1 ? '' : 's'}.`);
  tell();
  countdown = setInterval(() => {
    left -= 1;
    if (left > 0) return tell();
    clearInterval(countdown);
    say(waitBox, '');
    button.disabled = false;
  }, 1000);
}

function show(link) {
  for (const i of [form.url, form.expires, form.max_visits]) i.removeAttribute('aria-invalid');
  shortUrl.value = link.short_url;
  const original = document.getElementById('original-url');
  original.href = link.original_url;
  original.textContent = link.original_url;
  const limits = [];
  if (link.expires_at) limits.push(`Expires ${formatInstant(link.expires_at)}.`);
  if (link.max_visits) limits.push(`Allows ${link.max_visits} visit${link.max_visits === 1 ? '' : 's'}.`);
  const limitsBox = document.getElementById('limits');
  limitsBox.textContent = limits.join(' ');
  limitsBox.hidden = limits.length === 0;
  document.getElementById('stats-link').href = `/stats/${encodeURIComponent(link.code)}`;
  const qr = document.getElementById('qr');
  qr.src = `/api/links/${encodeURIComponent(link.code)}/qr`;
  qr.alt = `QR code of ${link.short_url}`;
  say(copyStatus, '');
  result.hidden = false;
  document.getElementById('result-title').focus();
}

document.getElementById('copy-button').addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(shortUrl.value);
    say(copyStatus, 'Copied to the clipboard.');
  } catch {
    // No clipboard access (permission, insecure context): leave the text selected to copy by hand.
    shortUrl.select();
    say(copyStatus, 'Selected: press Ctrl+C (⌘C) to copy.');
  }
});
