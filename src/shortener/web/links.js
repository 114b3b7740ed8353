import { ApiError, api, el, formatInstant, formatNumber, isoToLocal, localToIso, say, settlePage } from '/assets/api.js';
import { csvRow, parseCsv, unescapeCell } from '/assets/shortener/csv-file.js';
import { ALIAS_WORDS, linkRefusal, splitTags, TAGS_WORDS } from '/assets/shortener/link-words.js';

// "My links": the links of an API key (every link for a manager key), their
// edits, one create, a CSV import through the bulk create, and the exports.
// The key lives in this tab's sessionStorage only: never in the URL, a cookie
// or the page's address, which holds only the search and tag (bookmarkable).

const KEY_STORAGE = 'shortener-api-key';
const KEY_SHAPE = /^sk_[A-Za-z0-9_-]{43}$/;
const PER_PAGE = 25;
const MAX_PAGE = 1_000_000;
const MAX_SEARCH_LENGTH = 2048;
const MAX_TAG_LENGTH = 32;
/** The bulk create's most items per request. */
const CHUNK = 1000;
/** Rows of a file shown before importing, and results shown after (the download has them all). */
const PREVIEW_ROWS = 10;
const SHOWN_RESULTS = 500;
const MAX_FILE_BYTES = 10 * 1024 * 1024;
const TAG = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const ALIAS = /^[A-Za-z0-9_-]{3,64}$/;

const $ = (id) => document.getElementById(id);
const keyForm = $('key-form');
const workspace = $('workspace');
const statusBox = $('links-status');
const errorBox = $('links-error');
const tbody = document.querySelector('#links-table tbody');
const dialog = $('edit-dialog');
const state = { q: '', tag: '', page: 1, last: 1, links: new Map() };

const apiKey = () => sessionStorage.getItem(KEY_STORAGE);
const keyApi = (path, init = {}) => api(path, { ...init, token: apiKey() });

function showKeyForm(message) {
  workspace.hidden = true;
  keyForm.hidden = false;
  say($('key-error'), message);
  $('api-key').focus();
}

/** A refusal of any call: a 401 means the key is gone (revoked or mistyped), so it is forgotten and asked for again. */
function handle(err, box = errorBox) {
  if (err instanceof ApiError && err.status === 401) {
    sessionStorage.removeItem(KEY_STORAGE);
    if (dialog.open) dialog.close();
    return showKeyForm('This API key was not accepted: it may have been revoked or mistyped. Enter a key again.');
  }
  say(box, linkRefusal(err).text);
}

/* ---------- the list, its search and tag, in the page's address ---------- */

function readAddress() {
  const params = new URLSearchParams(location.search);
  // The API's bounds: what an address edited by hand puts out of them is left out rather than refused.
  const q = params.get('q') ?? '';
  const tag = (params.get('tag') ?? '').trim().toLowerCase();
  const page = Number(params.get('page'));
  state.q = q.length <= MAX_SEARCH_LENGTH ? q : '';
  state.tag = tag.length <= MAX_TAG_LENGTH ? tag : '';
  state.page = Number.isInteger(page) && page >= 1 && page <= MAX_PAGE ? page : 1;
  $('q').value = state.q;
  $('tag').value = state.tag;
}

/** The search, the tag and the page in the address (so the view can be bookmarked); never the key. */
function writeAddress() {
  const params = new URLSearchParams();
  if (state.q) params.set('q', state.q);
  if (state.tag) params.set('tag', state.tag);
  if (state.page > 1) params.set('page', String(state.page));
  const query = params.toString();
  const url = `${location.pathname}${query ? `?${query}` : ''}`;
  if (url !== `${location.pathname}${location.search}`) history.pushState(null, '', url);
}

async function load() {
  say(errorBox, '');
  const query = new URLSearchParams({ page: String(state.page), per_page: String(PER_PAGE) });
  if (state.q) query.set('q', state.q);
  if (state.tag) query.set('tag', state.tag);
  let result;
  try {
    result = await keyApi(`/api/links?${query}`);
  } catch (err) {
    if (!workspace.hidden || (err instanceof ApiError && err.status === 401)) return handle(err);
    return showKeyForm(linkRefusal(err).text);
  }
  keyForm.hidden = true;
  workspace.hidden = false;
  const total = Number(result.headers.get('x-total-count') ?? result.data.length);
  if (!settlePage(state, total, PER_PAGE)) {
    writeAddress();
    return load();
  }
  const filtered = state.q || state.tag;
  $('total').textContent = `(${formatNumber(total)}${filtered ? ' matching' : ''}${state.tag ? `, tagged ${state.tag}` : ''})`;
  $('page-label').textContent = `Page ${state.page} of ${state.last}`;
  $('prev').disabled = state.page <= 1;
  $('next').disabled = state.page >= state.last;
  $('empty').hidden = total > 0;
  state.links = new Map(result.data.map((l) => [l.code, l]));
  tbody.replaceChildren(...result.data.map(row));
}

function row(link) {
  // data-label: the column's name, shown beside each value where the table is laid out as cards (narrow screens).
  return el(
    'tr',
    { 'data-code': link.code },
    el('td', { 'data-label': 'Code' }, el('a', { href: `/stats/${link.code}`, 'aria-label': `Stats of ${link.code}` }, link.code)),
    el('td', { 'data-label': 'Title' }, link.title ?? '—'),
    el('td', { class: 'url', 'data-label': 'Goes to' }, link.original_url),
    el('td', { class: 'num', 'data-label': 'Clicks' }, formatNumber(link.clicks)),
    el(
      'td',
      { 'data-label': 'Tags' },
      link.tags.length === 0
        ? '—'
        : el(
            'div',
            { class: 'actions' },
            link.tags.map((tag) =>
              el('button', { type: 'button', class: 'link', 'data-tag': tag, 'aria-label': `Show links tagged ${tag}` }, tag),
            ),
          ),
    ),
    el('td', { 'data-label': 'Created' }, formatInstant(link.createdAt)),
    el('td', { 'data-label': 'Expires' }, link.expires_at ? formatInstant(link.expires_at) : '—'),
    el(
      'td',
      { 'data-label': 'Actions' },
      el('button', { type: 'button', class: 'small secondary', 'data-action': 'edit', 'aria-label': `Edit ${link.code}` }, 'Edit'),
    ),
  );
}

function filterBy({ q = state.q, tag = state.tag }) {
  state.q = q;
  state.tag = tag;
  state.page = 1;
  $('q').value = q;
  $('tag').value = tag;
  say(statusBox, '');
  writeAddress();
  return load();
}

$('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  filterBy({ q: $('q').value.trim(), tag: $('tag').value.trim().toLowerCase() });
});
$('clear-filters').addEventListener('click', () => filterBy({ q: '', tag: '' }));
$('prev').addEventListener('click', () => {
  state.page -= 1;
  writeAddress();
  load();
});
$('next').addEventListener('click', () => {
  state.page += 1;
  writeAddress();
  load();
});
window.addEventListener('popstate', () => {
  readAddress();
  if (apiKey()) load();
});

/* ---------- the key ---------- */

keyForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const key = $('api-key').value.trim();
  if (!KEY_SHAPE.test(key)) return say($('key-error'), 'An API key starts with sk_ and has 46 characters. Check that it was copied whole.');
  sessionStorage.setItem(KEY_STORAGE, key);
  $('api-key').value = '';
  load().then(() => {
    if (!workspace.hidden) $('links-title').focus();
  });
});

$('forget-key').addEventListener('click', () => {
  sessionStorage.removeItem(KEY_STORAGE);
  // Nothing the key showed stays on the page for the next person at this screen.
  tbody.replaceChildren();
  state.links.clear();
  importRows = [];
  importResults = [];
  $('csv-file').value = '';
  for (const id of ['preview', 'results']) $(id).hidden = true;
  for (const id of ['links-status', 'create-status', 'import-status']) say($(id), '');
  showKeyForm('The key is forgotten in this tab.');
});

/* ---------- fields and their errors ---------- */

/** Shows (or clears, with no text) the error under a field, and marks the field for assistive technology. */
function fieldError(input, text) {
  const out = $(`${input.id}-error`);
  say(out, text);
  if (text) input.setAttribute('aria-invalid', 'true');
  else input.removeAttribute('aria-invalid');
}

// A field's error goes as soon as the person changes the field: it was about the value before.
for (const form of [$('edit-form'), $('create-form')]) {
  form.addEventListener('input', (event) => {
    if (event.target.getAttribute('aria-invalid') === 'true') fieldError(event.target, '');
  });
}

/** Shows an API refusal under the field it is about (focusing that field), or in `box` when about no field. */
function showRefusal(err, fields, box) {
  const { field, text } = linkRefusal(err);
  const input = field && fields[field];
  if (input) {
    fieldError(input, text);
    input.focus();
  } else say(box, text);
}

/* ---------- editing ---------- */

const editFields = {
  url: $('edit-url'),
  title: $('edit-title'),
  expires_at: $('edit-expires'),
  max_visits: $('edit-max'),
  tags: $('edit-tags'),
};
let editing;

tbody.addEventListener('click', (event) => {
  const tagButton = event.target.closest('button[data-tag]');
  if (tagButton) {
    filterBy({ tag: tagButton.dataset.tag }).then(() => $('links-title').focus());
    return;
  }
  const button = event.target.closest('button[data-action="edit"]');
  const link = button && state.links.get(button.closest('tr').dataset.code);
  if (link) openEditor(link);
});

function openEditor(link) {
  editing = link;
  $('edit-code').textContent = link.code;
  editFields.url.value = link.original_url;
  editFields.title.value = link.title ?? '';
  editFields.expires_at.value = link.expires_at ? isoToLocal(link.expires_at) : '';
  editFields.max_visits.value = link.max_visits ?? '';
  editFields.tags.value = link.tags.join(' ');
  for (const input of Object.values(editFields)) fieldError(input, '');
  say($('edit-error'), '');
  $('history').replaceChildren();
  $('history-empty').hidden = true;
  dialog.showModal();
  editFields.url.focus();
  loadHistory(link.code);
}

async function loadHistory(code) {
  try {
    const { data } = await keyApi(`/api/links/${encodeURIComponent(code)}/destinations`);
    if (editing?.code !== code) return;
    $('history').replaceChildren(
      ...data.map((d) =>
        el(
          'li',
          {},
          el('span', { class: 'break' }, d.original_url),
          ' ',
          el('span', { class: 'muted' }, `(until ${formatInstant(d.replaced_at)})`),
        ),
      ),
    );
    $('history-empty').hidden = data.length > 0;
  } catch (err) {
    handle(err, $('edit-error'));
  }
}

/** The fields the person changed, as the PATCH takes them, or a field's problem found before asking. */
function editChanges(link) {
  const changes = {};
  const url = editFields.url.value.trim();
  if (!url) return { problem: [editFields.url, 'Enter the address the link goes to.'] };
  if (url !== link.original_url) changes.url = url;
  const title = editFields.title.value.trim() === '' ? null : editFields.title.value;
  if (title !== link.title) changes.title = title;
  const expires = editFields.expires_at.value;
  if (expires !== (link.expires_at ? isoToLocal(link.expires_at) : '')) {
    changes.expires_at = expires ? localToIso(expires) : null;
    if (changes.expires_at === undefined) return { problem: [editFields.expires_at, 'The expiry is not a valid date and time.'] };
  }
  const maxText = editFields.max_visits.value;
  const max = maxText === '' ? null : Number(maxText);
  if (max !== null && (!Number.isSafeInteger(max) || max < 1))
    return { problem: [editFields.max_visits, 'Maximum visits must be a whole number from 1, or empty.'] };
  if (max !== link.max_visits) changes.max_visits = max;
  const tags = splitTags(editFields.tags.value);
  if (tags.join(' ') !== link.tags.join(' ')) changes.tags = tags;
  return { changes };
}

$('edit-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  for (const input of Object.values(editFields)) fieldError(input, '');
  say($('edit-error'), '');
  const link = editing;
  const { changes, problem } = editChanges(link);
  if (problem) {
    fieldError(...problem);
    return problem[0].focus();
  }
  if (Object.keys(changes).length === 0) {
    dialog.close();
    return say(statusBox, `${link.code}: nothing changed.`);
  }
  try {
    await keyApi(`/api/links/${encodeURIComponent(link.code)}`, { method: 'PATCH', body: changes });
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return handle(err);
    return showRefusal(err, editFields, $('edit-error'));
  }
  dialog.close();
  say(statusBox, `${link.code} saved.`);
  await load();
  tbody.querySelector(`tr[data-code="${CSS.escape(link.code)}"] button[data-action="edit"]`)?.focus();
});

dialog.querySelector('[data-close]').addEventListener('click', () => dialog.close());
// Escape or Cancel: the focus goes back to the row's Edit button.
dialog.addEventListener('close', () => {
  if (editing && !dialog.contains(document.activeElement)) {
    tbody.querySelector(`tr[data-code="${CSS.escape(editing.code)}"] button[data-action="edit"]`)?.focus();
  }
});

/* ---------- one new link ---------- */

const createForm = $('create-form');
const createFields = { url: $('create-url'), alias: $('create-alias'), title: $('create-title'), tags: $('create-tags') };

createForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  for (const input of Object.values(createFields)) fieldError(input, '');
  say($('create-error'), '');
  say($('create-status'), '');
  const body = { url: createFields.url.value.trim() };
  if (!body.url) {
    fieldError(createFields.url, 'Enter the address to shorten, for example https://example.com/page.');
    return createFields.url.focus();
  }
  const alias = createFields.alias.value.trim();
  if (alias) body.alias = alias;
  if (createFields.title.value.trim()) body.title = createFields.title.value;
  const tags = splitTags(createFields.tags.value);
  if (tags.length > 0) body.tags = tags;
  const button = $('create-button');
  button.disabled = true;
  try {
    const { data } = await keyApi('/api/links', { method: 'POST', body });
    createForm.reset();
    say($('create-status'), `Created ${data.short_url}`);
    await load();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return handle(err);
    showRefusal(err, createFields, $('create-error'));
  } finally {
    button.disabled = false;
  }
});

/* ---------- downloads: the exports, and an import's results ---------- */

function saveFile(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = el('a', { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  // The download has taken its copy once the click is handled.
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

/** An export through fetch (the key goes as a header, never in a URL a plain link would need), saved as a file. */
async function exportLinks(format) {
  say(errorBox, '');
  let res;
  try {
    res = await fetch(`/api/links/export?format=${format}`, { headers: { authorization: `Bearer ${apiKey()}` } });
  } catch {
    return say(errorBox, 'The service could not be reached. Check your connection and try again.');
  }
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    return handle(new ApiError(res.status, body.message ?? ''));
  }
  saveFile(await res.blob(), `links.${format}`);
  say(statusBox, `Export as ${format.toUpperCase()} downloaded.`);
}
$('export-csv').addEventListener('click', () => exportLinks('csv'));
$('export-json').addEventListener('click', () => exportLinks('json'));

/* ---------- CSV import ---------- */

/** Column names a file may use, and the create field each one fills. */
const COLUMNS = { url: 'url', original_url: 'url', alias: 'alias', code: 'alias', title: 'title', tags: 'tags' };
let importRows = [];
let importResults = [];

/**
 * The rows of a file: each with its row number in the file (the header is row
 * 1), the create body it makes, and its problem found before sending, if any.
 */
function rowsOf(text) {
  const records = parseCsv(text);
  if (records.length === 0) throw new Error('The file is empty.');
  const header = records[0].map((name) => name.trim().toLowerCase());
  const index = {};
  header.forEach((name, i) => {
    const field = COLUMNS[name];
    if (field && index[field] === undefined) index[field] = i;
  });
  if (index.url === undefined) throw new Error('The first row must name the columns, one of them “url”.');
  const rows = [];
  records.slice(1).forEach((record, i) => {
    if (record.every((cell) => cell.trim() === '')) return;
    const cell = (field) => (index[field] === undefined ? '' : unescapeCell(record[index[field]] ?? '').trim());
    const body = { url: cell('url') };
    const alias = cell('alias');
    const title = cell('title');
    const tags = splitTags(cell('tags'));
    if (alias) body.alias = alias;
    if (title) body.title = title;
    if (tags.length > 0) body.tags = tags;
    let problem;
    if (!body.url) problem = 'No URL.';
    else if (body.url.length > 2048) problem = 'The URL is longer than 2,048 characters.';
    else if (alias && !ALIAS.test(alias)) problem = ALIAS_WORDS;
    else if (title.length > 200) problem = 'A title is at most 200 characters.';
    else if (tags.length > 10 || !tags.every((t) => TAG.test(t))) problem = TAGS_WORDS;
    rows.push({ line: i + 2, body, problem });
  });
  return rows;
}

const previewRow = (r) =>
  el(
    'tr',
    {},
    el('td', { 'data-label': 'Row' }, String(r.line)),
    el('td', { class: 'url', 'data-label': 'URL' }, r.body.url || '—'),
    el('td', { 'data-label': 'Back-half' }, r.body.alias ?? '—'),
    el('td', { 'data-label': 'Title' }, r.body.title ?? '—'),
    el('td', { 'data-label': 'Tags' }, r.body.tags?.join(' ') ?? '—'),
    el('td', { 'data-label': 'Problem' }, r.problem ?? '—'),
  );

$('csv-file').addEventListener('change', async (event) => {
  const file = event.target.files[0];
  say($('import-error'), '');
  say($('import-status'), '');
  $('preview').hidden = true;
  $('results').hidden = true;
  importRows = [];
  if (!file) return;
  if (file.size > MAX_FILE_BYTES) return say($('import-error'), 'The file is larger than 10 MB: split it into smaller files.');
  try {
    importRows = rowsOf(await file.text());
  } catch (err) {
    return say($('import-error'), `This file cannot be read as CSV. ${err.message}`);
  }
  if (importRows.length === 0) return say($('import-error'), 'The file has a header row but no links.');
  const bad = importRows.filter((r) => r.problem);
  const good = importRows.length - bad.length;
  $('preview-summary').textContent =
    `${formatNumber(importRows.length)} row${importRows.length === 1 ? '' : 's'}: ${formatNumber(good)} to import` +
    (bad.length ? `, ${formatNumber(bad.length)} with a problem (not sent). ` : '. ') +
    `Shown: the first ${Math.min(PREVIEW_ROWS, importRows.length)}${bad.length ? ' and every row with a problem' : ''}.`;
  const shown = importRows.filter((r, i) => i < PREVIEW_ROWS || r.problem).slice(0, PREVIEW_ROWS + 100);
  document.querySelector('#preview-table tbody').replaceChildren(...shown.map(previewRow));
  $('import-button').disabled = good === 0;
  $('preview').hidden = false;
});

$('import-button').addEventListener('click', async () => {
  const button = $('import-button');
  button.disabled = true;
  say($('import-error'), '');
  const toSend = importRows.filter((r) => !r.problem);
  const results = new Map(importRows.filter((r) => r.problem).map((r) => [r, { reason: r.problem }]));
  let stopped;
  for (let start = 0; start < toSend.length; start += CHUNK) {
    const chunk = toSend.slice(start, start + CHUNK);
    if (stopped) {
      for (const r of chunk) results.set(r, { reason: stopped });
      continue;
    }
    say(
      $('import-status'),
      `Importing rows ${formatNumber(start + 1)} to ${formatNumber(start + chunk.length)} of ${formatNumber(toSend.length)}…`,
    );
    try {
      const { data } = await keyApi('/api/links/bulk', { method: 'POST', body: chunk.map((r) => r.body) });
      data.results.forEach((item, i) => {
        results.set(
          chunk[i],
          item.status === 201 ? { code: item.data.code, shortUrl: item.data.short_url } : { reason: linkRefusal(item).text },
        );
      });
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        button.disabled = false;
        return handle(err);
      }
      // The whole request was refused (a quota used up, the service away): this chunk and the next are not created.
      stopped = `Not created: ${linkRefusal(err).text}`;
      for (const r of chunk) results.set(r, { reason: stopped });
    }
  }
  importResults = importRows.map((r) => ({ ...r, ...results.get(r) }));
  const created = importResults.filter((r) => r.code).length;
  const refused = importResults.length - created;
  document
    .querySelector('#results-table tbody')
    .replaceChildren(
      ...importResults
        .slice(0, SHOWN_RESULTS)
        .map((r) =>
          el(
            'tr',
            {},
            el('td', { 'data-label': 'Row' }, String(r.line)),
            el('td', { class: 'url', 'data-label': 'URL' }, r.body.url || '—'),
            el(
              'td',
              { 'data-label': 'Result' },
              r.code ? ['Created ', el('a', { href: `/stats/${r.code}` }, r.code)] : `Refused: ${r.reason}`,
            ),
          ),
        ),
    );
  const more = importResults.length - SHOWN_RESULTS;
  say($('results-more'), more > 0 ? `${formatNumber(more)} more rows are in the download.` : '');
  $('results').hidden = false;
  $('preview').hidden = true;
  say($('import-status'), `Import done: ${formatNumber(created)} created, ${formatNumber(refused)} refused.`);
  await load();
});

$('download-results').addEventListener('click', () => {
  const header = csvRow(['row', 'url', 'alias', 'title', 'tags', 'result', 'code', 'short_url', 'reason']);
  const lines = importResults.map((r) =>
    csvRow([
      r.line,
      r.body.url,
      r.body.alias,
      r.body.title,
      r.body.tags?.join('|'),
      r.code ? 'created' : 'refused',
      r.code,
      r.shortUrl,
      r.code ? '' : r.reason,
    ]),
  );
  saveFile(new Blob([header, ...lines], { type: 'text/csv' }), 'import-results.csv');
});

/* ---------- start ---------- */

readAddress();
if (apiKey()) load();
else showKeyForm('');
