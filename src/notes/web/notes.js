import { ApiError, el, formatInstant, formatNumber, say } from '/assets/api.js';
import { authorized, onSessionEnded, register, resume, SessionEnded, signedInEmail, signIn, signOut } from '/assets/notes/session.js';

const PER_PAGE = 10;
const $ = (id) => document.getElementById(id);
const signedOutBox = $('signed-out');
const signedInBox = $('signed-in');
const list = $('notes');
const statusBox = $('notes-status');
const errorBox = $('notes-error');
const state = { q: '', page: 1, last: 1, notes: new Map() };

function showSignedOut(message) {
  $('loading').hidden = true;
  signedInBox.hidden = true;
  signedOutBox.hidden = false;
  list.replaceChildren();
  state.notes.clear();
  say($('signed-out-status'), message);
}

function showSignedIn() {
  $('loading').hidden = true;
  signedOutBox.hidden = true;
  signedInBox.hidden = false;
  $('who').textContent = signedInEmail() ?? 'you';
}

onSessionEnded((err) => {
  for (const dialog of document.querySelectorAll('dialog[open]')) dialog.close();
  showSignedOut(err.message);
  $('signin-email').focus();
});

/** A refusal of a call: an ended session has already switched the page; the rest is shown in `box`. */
function handle(err, box = errorBox) {
  if (err instanceof SessionEnded) return;
  say(box, err.message);
}

function markInvalid(input, invalid) {
  if (invalid) input.setAttribute('aria-invalid', 'true');
  else input.removeAttribute('aria-invalid');
}

// ---- signing in and up ------------------------------------------------------------------------

/** Both fields filled, or the first empty one marked and focused. */
function credentials(form, errorOut) {
  const email = form.elements.email.value.trim();
  const password = form.elements.password.value;
  markInvalid(form.elements.email, !email);
  markInvalid(form.elements.password, email && !password);
  if (!email || !password) {
    say(errorOut, 'Enter your email and a password.');
    (email ? form.elements.password : form.elements.email).focus();
    return undefined;
  }
  return { email, password };
}

async function enter() {
  showSignedIn();
  $('signin-form').reset();
  $('signup-form').reset();
  say(statusBox, '');
  say(errorBox, '');
  say($('page-error'), '');
  state.q = '';
  state.page = 1;
  $('q').value = '';
  await load();
  $('new-title').focus();
}

$('signin-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const errorOut = $('signin-error');
  say(errorOut, '');
  const input = credentials(form, errorOut);
  if (!input) return;
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  try {
    await signIn(input.email, input.password);
    await enter();
  } catch (err) {
    say(errorOut, err.message);
    form.elements.password.focus();
  } finally {
    button.disabled = false;
  }
});

$('signup-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const errorOut = $('signup-error');
  say(errorOut, '');
  say($('signup-status'), '');
  const input = credentials(form, errorOut);
  if (!input) return;
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  try {
    await register(input.email, input.password);
  } catch (err) {
    button.disabled = false;
    say(errorOut, err.message);
    markInvalid(form.elements.password, /password/i.test(err.message));
    return (/password/i.test(err.message) ? form.elements.password : form.elements.email).focus();
  }
  try {
    await signIn(input.email, input.password);
    await enter();
  } catch (err) {
    // Registered, but not signed in: the provider wants the address confirmed first.
    if (err instanceof ApiError && err.status === 401) say($('signup-status'), 'Account created. Confirm your address with the link we emailed you, then sign in.');
    else say(errorOut, err.message);
  } finally {
    button.disabled = false;
  }
});

$('signout').addEventListener('click', async () => {
  await signOut();
  showSignedOut('You are signed out.');
  $('signin-email').focus();
});

// ---- the list ---------------------------------------------------------------------------------

async function load() {
  say(errorBox, '');
  const query = new URLSearchParams({ limit: String(PER_PAGE), offset: String((state.page - 1) * PER_PAGE) });
  if (state.q) query.set('q', state.q);
  let result;
  try {
    result = await authorized(`/notes?${query}`);
  } catch (err) {
    return handle(err);
  }
  const total = Number(result.headers.get('x-total-count') ?? result.data.length);
  state.last = Math.max(1, Math.ceil(total / PER_PAGE));
  // The last page emptied (a delete, another tab): show the one before.
  if (state.page > state.last && total > 0) {
    state.page = state.last;
    return load();
  }
  $('total').textContent = `(${formatNumber(total)}${state.q ? ' matching' : ''})`;
  $('page-label').textContent = `Page ${state.page} of ${state.last}`;
  $('prev').disabled = state.page <= 1;
  $('next').disabled = state.page >= state.last;
  $('empty').textContent = state.q ? 'No notes match your search.' : 'No notes yet.';
  $('empty').hidden = total > 0;
  state.notes = new Map(result.data.map((n) => [String(n.id), n]));
  list.replaceChildren(...result.data.map((n) => el('li', { class: 'note card', 'data-id': n.id }, noteView(n))));
}

function noteView(note) {
  const edited = note.updated_at && note.updated_at !== note.created_at;
  return el(
    'article',
    { 'aria-labelledby': `note-${note.id}-title` },
    el('h3', { id: `note-${note.id}-title`, class: 'break' }, note.title),
    note.body ? el('p', { class: 'note-body break' }, note.body) : null,
    el(
      'p',
      { class: 'note-meta muted' },
      el('time', { datetime: note.created_at }, formatInstant(note.created_at)),
      edited ? [' · edited ', el('time', { datetime: note.updated_at }, formatInstant(note.updated_at))] : null,
    ),
    el(
      'div',
      { class: 'actions' },
      el('button', { type: 'button', class: 'small secondary', 'data-action': 'edit', 'aria-label': `Edit ${note.title}` }, 'Edit'),
      el('button', { type: 'button', class: 'small danger', 'data-action': 'delete', 'aria-label': `Delete ${note.title}` }, 'Delete'),
    ),
  );
}

function editView(note) {
  const id = `edit-${note.id}`;
  return el(
    'form',
    { class: 'edit-form', 'aria-label': `Edit ${note.title}`, novalidate: true },
    el('div', { class: 'field' }, el('label', { for: `${id}-title` }, 'Title'), el('input', { id: `${id}-title`, name: 'title', type: 'text', required: true, maxlength: 200, value: note.title, autocomplete: 'off' })),
    el('div', { class: 'field' }, el('label', { for: `${id}-body` }, 'Text'), el('textarea', { id: `${id}-body`, name: 'body', rows: 4, maxlength: 10000 }, note.body ?? '')),
    el('p', { class: 'message error', role: 'alert', hidden: true }),
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Save'), el('button', { type: 'button', class: 'secondary', 'data-action': 'cancel' }, 'Cancel')),
  );
}

function itemOf(id) {
  return list.querySelector(`li[data-id="${CSS.escape(String(id))}"]`);
}

function showNote(note, focusAction) {
  const item = itemOf(note.id);
  if (!item) return;
  item.replaceChildren(noteView(note));
  if (focusAction) item.querySelector(`button[data-action="${focusAction}"]`)?.focus();
}

let deleting;
list.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-action]');
  if (!button) return;
  const note = state.notes.get(button.closest('li').dataset.id);
  if (!note) return;
  const action = button.dataset.action;
  if (action === 'edit') {
    say(statusBox, '');
    const item = itemOf(note.id);
    item.replaceChildren(editView(note));
    item.querySelector('input').focus();
  } else if (action === 'cancel') {
    showNote(note, 'edit');
  } else if (action === 'delete') {
    deleting = note;
    $('delete-name').textContent = note.title;
    say($('delete-error'), '');
    $('delete-dialog').showModal();
  }
});

list.addEventListener('keydown', (event) => {
  const form = event.target.closest('form.edit-form');
  if (event.key !== 'Escape' || !form) return;
  const note = state.notes.get(form.closest('li').dataset.id);
  if (note) showNote(note, 'edit');
});

list.addEventListener('submit', async (event) => {
  const form = event.target.closest('form.edit-form');
  if (!form) return;
  event.preventDefault();
  const note = state.notes.get(form.closest('li').dataset.id);
  const errorOut = form.querySelector('.message.error');
  const title = form.elements.title.value;
  markInvalid(form.elements.title, !title.trim());
  if (!title.trim()) {
    say(errorOut, 'Enter a title.');
    return form.elements.title.focus();
  }
  const save = form.querySelector('button[type="submit"]');
  save.disabled = true;
  try {
    const { data } = await authorized(`/notes/${encodeURIComponent(note.id)}`, { method: 'PATCH', body: { title, body: form.elements.body.value } });
    state.notes.set(String(data.id), data);
    showNote(data, 'edit');
    say(statusBox, 'Note saved.');
  } catch (err) {
    save.disabled = false;
    handle(err, errorOut);
  }
});

$('delete-dialog').querySelector('[data-close]').addEventListener('click', () => $('delete-dialog').close());

$('delete-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const dialog = $('delete-dialog');
  try {
    await authorized(`/notes/${encodeURIComponent(deleting.id)}`, { method: 'DELETE' });
  } catch (err) {
    // Gone already (another tab): the list is out of date, so it is reloaded as after a delete.
    if (!(err instanceof ApiError && err.status === 404)) return handle(err, $('delete-error'));
  }
  dialog.close();
  say(statusBox, 'Note deleted.');
  await load();
  $('list-title').focus();
});

$('create-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const errorOut = $('create-error');
  say(errorOut, '');
  say(statusBox, '');
  const title = form.elements.title.value;
  markInvalid(form.elements.title, !title.trim());
  if (!title.trim()) {
    say(errorOut, 'Enter a title.');
    return form.elements.title.focus();
  }
  const body = { title };
  if (form.elements.body.value !== '') body.body = form.elements.body.value;
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  try {
    await authorized('/notes', { method: 'POST', body });
    form.reset();
    say(statusBox, 'Note added.');
    // Newest first: the new note heads the first page of the unfiltered list.
    state.q = '';
    $('q').value = '';
    state.page = 1;
    await load();
    form.elements.title.focus();
  } catch (err) {
    handle(err, errorOut);
  } finally {
    button.disabled = false;
  }
});

$('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  state.q = $('q').value.trim();
  state.page = 1;
  say(statusBox, '');
  load();
});
$('prev').addEventListener('click', () => {
  state.page -= 1;
  load();
});
$('next').addEventListener('click', () => {
  state.page += 1;
  load();
});

// ---- start: resume the tab's session, if it has one -------------------------------------------

try {
  if (await resume()) await enter();
  else if (signedOutBox.hidden) showSignedOut('');
} catch (err) {
  showSignedOut('');
  say($('page-error'), `Your session could not be restored: ${err.message}`);
}
