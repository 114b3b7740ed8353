import { ApiError, api, el, formatInstant, formatNumber, isoToLocal, localToIso, say, settlePage } from '/assets/api.js';

// The key lives in this tab's sessionStorage only: gone when the tab closes, never in a cookie or the URL.
const KEY_STORAGE = 'shortener-admin-key';
const PER_PAGE = 20;
const keyForm = document.getElementById('key-form');
const keyError = document.getElementById('key-error');
const adminBox = document.getElementById('admin');
const statusBox = document.getElementById('admin-status');
const errorBox = document.getElementById('admin-error');
const tbody = document.querySelector('#links-table tbody');
const state = { q: '', page: 1, last: 1, links: new Map() };

const adminKey = () => sessionStorage.getItem(KEY_STORAGE);
const adminApi = (path, init = {}) => api(path, { ...init, headers: { authorization: `Bearer ${adminKey()}` } });

function showKeyForm(message) {
  adminBox.hidden = true;
  keyForm.hidden = false;
  say(keyError, message);
  document.getElementById('admin-key').focus();
}

/** A refusal of any admin call: a 401 or 503 is about the key or the service, the rest about the action. */
function handle(err, box = errorBox) {
  if (err instanceof ApiError && err.status === 401) {
    sessionStorage.removeItem(KEY_STORAGE);
    return showKeyForm('That admin key was not accepted. Check SHORTENER_ADMIN_KEY and try again.');
  }
  say(box, explain(err));
}

/** An admin API refusal in words (the fields it names are this page's inputs). */
function explain(err) {
  if (!(err instanceof ApiError) || err.status === 0) return err.message;
  if (/expires_at/.test(err.message)) return 'The expiry is not a valid date and time.';
  if (/max_visits/.test(err.message)) return 'Maximum visits must be a whole number from 1, or empty.';
  if (err.status === 404) return 'This link no longer exists; search again to refresh the list.';
  if (err.status === 503) return 'The admin API is off on this service (SHORTENER_ADMIN_KEY is not set), or the service is busy.';
  if (err.status === 400) return 'The service refused this change. Check the values and try again.';
  return 'The service could not answer just now. Try again in a moment.';
}

async function load() {
  say(errorBox, '');
  const query = new URLSearchParams({ page: String(state.page), per_page: String(PER_PAGE) });
  if (state.q) query.set('q', state.q);
  let result;
  try {
    result = await adminApi(`/api/links?${query}`);
  } catch (err) {
    if (!adminBox.hidden || !(err instanceof ApiError) || err.status === 401) return handle(err);
    return showKeyForm(explain(err));
  }
  keyForm.hidden = true;
  adminBox.hidden = false;
  const total = Number(result.headers.get('x-total-count') ?? result.data.length);
  if (!settlePage(state, total, PER_PAGE)) return load();
  document.getElementById('total').textContent = `(${formatNumber(total)}${state.q ? ' matching' : ''})`;
  document.getElementById('page-label').textContent = `Page ${state.page} of ${state.last}`;
  document.getElementById('prev').disabled = state.page <= 1;
  document.getElementById('next').disabled = state.page >= state.last;
  document.getElementById('empty').hidden = total > 0;
  state.links = new Map(result.data.map((l) => [l.code, l]));
  tbody.replaceChildren(...result.data.map(row));
}

function linkState(link) {
  if (link.disabled) return 'disabled';
  if (link.expires_at && Date.parse(link.expires_at) <= Date.now()) return 'expired';
  if (link.max_visits && link.clicks >= link.max_visits) return 'exhausted';
  return 'active';
}

function row(link) {
  const s = linkState(link);
  return el(
    'tr',
    { 'data-code': link.code },
    // data-label: the column's name, shown beside each value where the table is laid out as cards (narrow screens).
    el('td', { 'data-label': 'Code' }, el('a', { href: `/stats/${link.code}`, 'aria-label': `Stats of ${link.code}` }, link.code)),
    el('td', { class: 'url', 'data-label': 'Goes to' }, link.original_url),
    el('td', { class: 'num', 'data-label': 'Clicks' }, formatNumber(link.clicks)),
    el('td', { 'data-label': 'State' }, el('span', { class: `badge ${s}` }, s)),
    el('td', { 'data-label': 'Expires' }, link.expires_at ? formatInstant(link.expires_at) : '—'),
    el('td', { class: 'num', 'data-label': 'Max visits' }, link.max_visits ? formatNumber(link.max_visits) : '—'),
    el(
      'td',
      { 'data-label': 'Actions' },
      el(
        'div',
        { class: 'actions' },
        el(
          'button',
          {
            type: 'button',
            class: 'small secondary',
            'data-action': 'toggle',
            'aria-label': `${link.disabled ? 'Enable' : 'Disable'} ${link.code}`,
          },
          link.disabled ? 'Enable' : 'Disable',
        ),
        el('button', { type: 'button', class: 'small secondary', 'data-action': 'edit', 'aria-label': `Edit ${link.code}` }, 'Edit'),
        el('button', { type: 'button', class: 'small danger', 'data-action': 'delete', 'aria-label': `Delete ${link.code}` }, 'Delete'),
      ),
    ),
  );
}

keyForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const key = document.getElementById('admin-key').value.trim();
  if (!key) return say(keyError, 'Enter the admin key.');
  sessionStorage.setItem(KEY_STORAGE, key);
  document.getElementById('admin-key').value = '';
  load();
});

document.getElementById('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(KEY_STORAGE);
  tbody.replaceChildren();
  showKeyForm('');
});

document.getElementById('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  state.q = document.getElementById('q').value.trim();
  state.page = 1;
  say(statusBox, '');
  load();
});
document.getElementById('prev').addEventListener('click', () => {
  state.page -= 1;
  load();
});
document.getElementById('next').addEventListener('click', () => {
  state.page += 1;
  load();
});

let current;
tbody.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-action]');
  if (!button) return;
  current = state.links.get(button.closest('tr').dataset.code);
  if (!current) return;
  const action = button.dataset.action;
  if (action === 'toggle') {
    try {
      await adminApi(`/api/links/${current.code}`, { method: 'PATCH', body: { disabled: !current.disabled } });
      say(statusBox, `${current.code} ${current.disabled ? 'enabled' : 'disabled'}.`);
      await load();
      tbody.querySelector(`tr[data-code="${current.code}"] button[data-action="toggle"]`)?.focus();
    } catch (err) {
      handle(err);
    }
  } else if (action === 'edit') {
    document.getElementById('edit-code').textContent = current.code;
    document.getElementById('edit-expires').value = current.expires_at ? isoToLocal(current.expires_at) : '';
    document.getElementById('edit-max').value = current.max_visits ?? '';
    say(document.getElementById('edit-error'), '');
    document.getElementById('edit-dialog').showModal();
  } else if (action === 'delete') {
    document.getElementById('delete-code').textContent = current.code;
    say(document.getElementById('delete-error'), '');
    document.getElementById('delete-dialog').showModal();
  }
});

for (const dialog of document.querySelectorAll('dialog')) {
  dialog.querySelector('[data-close]').addEventListener('click', () => dialog.close());
}

document.getElementById('edit-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const dialog = document.getElementById('edit-dialog');
  const errorOut = document.getElementById('edit-error');
  const expires = document.getElementById('edit-expires').value;
  const max = document.getElementById('edit-max').value;
  const body = { expires_at: expires ? localToIso(expires) : null, max_visits: max === '' ? null : Number(max) };
  if (body.max_visits !== null && (!Number.isInteger(body.max_visits) || body.max_visits < 1))
    return say(errorOut, 'Maximum visits must be a whole number from 1, or empty.');
  try {
    await adminApi(`/api/links/${current.code}`, { method: 'PATCH', body });
    dialog.close();
    say(statusBox, `${current.code} updated.`);
    await load();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) dialog.close();
    handle(err, errorOut);
  }
});

document.getElementById('delete-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const dialog = document.getElementById('delete-dialog');
  try {
    await adminApi(`/api/links/${current.code}`, { method: 'DELETE' });
    dialog.close();
    say(statusBox, `${current.code} deleted.`);
    await load();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) dialog.close();
    handle(err, document.getElementById('delete-error'));
  }
});

if (adminKey()) load();
else showKeyForm('');
