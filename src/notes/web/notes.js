import { el, formatInstant, formatNumber, say, settlePage } from '/assets/api.js';
import {
  authorized,
  explain,
  onSessionEnded,
  register,
  resume,
  SessionEnded,
  signedInEmail,
  signIn,
  signOut,
} from '/assets/notes/session.js';

const PER_PAGE = 10;
/** The service's limits, shown as counters beside the fields rather than cutting what is typed. */
const LIMITS = { title: 200, body: 10_000 };
/** A note being edited is saved this long after the last keystroke. */
const AUTOSAVE_MS = 1500;
/** The list shows the start of each note: its first lines, up to this many characters. */
const PREVIEW_LINES = 3;
const PREVIEW_CHARACTERS = 240;
const $ = (id) => document.getElementById(id);
const signedOutBox = $('signed-out');
const signedInBox = $('signed-in');
const list = $('notes');
const statusBox = $('notes-status');
const errorBox = $('notes-error');
const state = { q: '', page: 1, last: 1, notes: new Map() };
const characters = (text) => [...text].length;

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
  say(box, explain(err));
}

function markInvalid(input, invalid) {
  if (invalid) input.setAttribute('aria-invalid', 'true');
  else input.removeAttribute('aria-invalid');
}

// ---- counters: the limits shown as the person types ----------------------------------------------

/** The counter of a field (`<output data-counts="<input id>">`), updated as it is typed in. */
function count(input) {
  const out = input.form.querySelector(`output[data-counts="${input.id}"]`);
  if (!out) return;
  const limit = LIMITS[input.name];
  const used = characters(input.value);
  out.textContent = `${formatNumber(used)} / ${formatNumber(limit)}`;
  out.classList.toggle('over', used > limit);
}

/** The first field over its limit, with what to say about it; undefined when both fit. */
function overLimit(form) {
  const title = form.elements.title;
  const body = form.elements.body;
  if (characters(title.value) > LIMITS.title)
    return { input: title, text: `The title is ${formatNumber(characters(title.value))} characters long; at most 200 fit. Shorten it.` };
  if (characters(body.value) > LIMITS.body)
    return {
      input: body,
      text: `The text is ${formatNumber(characters(body.value))} characters long; at most 10,000 fit. Shorten it, or split it into two notes.`,
    };
  return undefined;
}

document.addEventListener('input', (event) => {
  if (event.target.matches('input[name="title"], textarea[name="body"]')) count(event.target);
});

// ---- signing in and up ------------------------------------------------------------------------

/** Both fields filled, or the first empty one marked and focused. */
function credentials(form, errorOut) {
  const email = form.elements.email.value.trim();
  const password = form.elements.password.value;
  markInvalid(form.elements.email, !email);
  markInvalid(form.elements.password, email && !password);
  if (!email || !password) {
    say(errorOut, 'Enter your email address and a password.');
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
  for (const input of $('create-form').querySelectorAll('input, textarea')) count(input);
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
    say(errorOut, explain(err));
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
    const text = explain(err);
    say(errorOut, text);
    markInvalid(form.elements.password, /password/i.test(text));
    return (/password/i.test(text) ? form.elements.password : form.elements.email).focus();
  }
  try {
    await signIn(input.email, input.password);
    await enter();
  } catch (err) {
    // Registered, but not signed in: the provider wants the address confirmed first.
    if (err.status === 401) say($('signup-status'), 'Account created. Confirm your address with the link we emailed you, then sign in.');
    else say(errorOut, explain(err));
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
  if (!settlePage(state, total, PER_PAGE)) return load();
  $('total').textContent = `(${formatNumber(total)}${state.q ? ' matching' : ''})`;
  // A pager only when there is more than one page.
  $('pager').hidden = state.last <= 1;
  $('page-label').textContent = `Page ${state.page} of ${state.last}`;
  $('prev').disabled = state.page <= 1;
  $('next').disabled = state.page >= state.last;
  $('empty').textContent = state.q ? 'No notes match your search.' : 'No notes yet.';
  $('empty').hidden = total > 0;
  state.notes = new Map(result.data.map((n) => [String(n.id), n]));
  list.replaceChildren(...result.data.map((n) => el('li', { class: 'note card', 'data-id': n.id }, noteView(n))));
}

/** The start of a note's text: its first lines, cut at a word, with "…" when there is more. */
function preview(body) {
  const lines = body.split('\n').filter((line) => line.trim() !== '');
  let text = lines.slice(0, PREVIEW_LINES).join('\n');
  if (text.length > PREVIEW_CHARACTERS) text = text.slice(0, PREVIEW_CHARACTERS).replace(/\s+\S*$/, '');
  return text.length < body.trim().length ? `${text}…` : text;
}

function noteView(note) {
  const edited = note.updated_at && note.updated_at !== note.created_at;
  return el(
    'article',
    { 'aria-labelledby': `note-${note.id}-title` },
    el('h3', { id: `note-${note.id}-title`, class: 'break' }, note.title),
    note.body ? el('p', { class: 'note-body break' }, preview(note.body)) : null,
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

/** A field with its label and its counter. */
function counted(id, label, control) {
  return el(
    'div',
    { class: 'field' },
    el(
      'div',
      { class: 'label-row' },
      el('label', { for: id }, label),
      el('output', { class: 'counter', 'data-counts': id, 'aria-live': 'off' }),
    ),
    control,
  );
}

function editView(note) {
  const id = `edit-${note.id}`;
  return el(
    'form',
    { class: 'edit-form', 'aria-label': `Edit ${note.title}`, novalidate: true },
    counted(
      `${id}-title`,
      'Title',
      el('input', { id: `${id}-title`, name: 'title', type: 'text', required: true, value: note.title, autocomplete: 'off' }),
    ),
    counted(`${id}-body`, 'Text', el('textarea', { id: `${id}-body`, name: 'body', rows: 8 }, note.body ?? '')),
    el('p', { class: 'message error', role: 'alert', hidden: true }),
    el('p', { class: 'autosave hint', role: 'status' }, 'Changes are saved as you type. Escape or Done closes the note.'),
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Done')),
  );
}

function itemOf(id) {
  return list.querySelector(`li[data-id="${CSS.escape(String(id))}"]`);
}

function showNote(note, focusAction) {
  const item = itemOf(note.id);
  if (!item) return;
  editors.get(String(note.id))?.stop();
  editors.delete(String(note.id));
  item.replaceChildren(noteView(note));
  if (focusAction) item.querySelector(`button[data-action="${focusAction}"]`)?.focus();
}

// ---- editing: saved as it is typed ---------------------------------------------------------------

/** The open editors by note id: what is saved, and the save planned after the last keystroke. */
const editors = new Map();

/**
 * An editor of one note. Typing plans a save AUTOSAVE_MS after the last
 * keystroke; `flush()` saves now what is not saved yet. A title that is
 * empty or over its limit is not saved (the form says why) until it is fixed.
 */
function startEditor(note, form) {
  const status = form.querySelector('.autosave');
  const errorOut = form.querySelector('.message.error');
  let saved = { title: note.title, body: note.body ?? '' };
  let timer;
  let saving = Promise.resolve(true);
  const typed = () => ({ title: form.elements.title.value, body: form.elements.body.value });
  const dirty = () => {
    const now = typed();
    return now.title !== saved.title || now.body !== saved.body;
  };
  async function save() {
    clearTimeout(timer);
    if (!dirty()) return true;
    const problem = !form.elements.title.value.trim() ? { input: form.elements.title, text: 'Enter a title.' } : overLimit(form);
    markInvalid(form.elements.title, problem?.input === form.elements.title);
    markInvalid(form.elements.body, problem?.input === form.elements.body);
    if (problem) {
      say(errorOut, problem.text);
      status.textContent = 'Not saved yet.';
      return false;
    }
    say(errorOut, '');
    const sending = typed();
    status.textContent = 'Saving…';
    try {
      const { data } = await authorized(`/notes/${encodeURIComponent(note.id)}`, { method: 'PATCH', body: sending });
      saved = { title: data.title, body: data.body ?? '' };
      state.notes.set(String(data.id), data);
      status.textContent = dirty() ? 'Saving…' : `Saved at ${new Date().toLocaleTimeString(undefined, { timeStyle: 'short' })}.`;
      return true;
    } catch (err) {
      status.textContent = 'Not saved.';
      handle(err, errorOut);
      return false;
    }
  }
  const editor = {
    dirty,
    /** Saves what is not saved yet, after any save under way. */
    flush: () => {
      saving = saving.then(save);
      return saving;
    },
    planSave: () => {
      clearTimeout(timer);
      status.textContent = 'Editing…';
      timer = setTimeout(() => editor.flush(), AUTOSAVE_MS);
    },
    stop: () => clearTimeout(timer),
  };
  editors.set(String(note.id), editor);
  for (const input of form.querySelectorAll('input, textarea')) count(input);
  return editor;
}

list.addEventListener('input', (event) => {
  const form = event.target.closest('form.edit-form');
  if (form) editors.get(form.closest('li').dataset.id)?.planSave();
});

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
    const form = editView(note);
    item.replaceChildren(form);
    startEditor(note, form);
    item.querySelector('input').focus();
  } else if (action === 'delete') {
    deleting = note;
    $('delete-name').textContent = note.title;
    say($('delete-error'), '');
    $('delete-dialog').showModal();
  }
});

/**
 * Closes a note's editor. What autosave could not save yet (a save that
 * failed, a title left empty) is asked about first: discard it, or keep editing.
 */
async function close(note) {
  const id = String(note.id);
  const editor = editors.get(id);
  if (editor?.dirty() && !(await editor.flush()) && !(await discardConfirmed(state.notes.get(id) ?? note))) {
    return itemOf(id)?.querySelector('input')?.focus();
  }
  showNote(state.notes.get(id) ?? note, 'edit');
}

/** The discard dialog: resolves true when the person chooses to discard their changes. */
function discardConfirmed(note) {
  const dialog = $('discard-dialog');
  $('discard-name').textContent = note.title;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'discard'), { once: true }));
}
$('discard-dialog')
  .querySelector('[data-close]')
  .addEventListener('click', () => $('discard-dialog').close());

list.addEventListener('keydown', (event) => {
  const form = event.target.closest('form.edit-form');
  if (event.key !== 'Escape' || !form) return;
  event.preventDefault();
  const note = state.notes.get(form.closest('li').dataset.id);
  if (note) close(note);
});

list.addEventListener('submit', async (event) => {
  const form = event.target.closest('form.edit-form');
  if (!form) return;
  event.preventDefault();
  const id = form.closest('li').dataset.id;
  const editor = editors.get(id);
  const done = form.querySelector('button[type="submit"]');
  done.disabled = true;
  const ok = await editor.flush();
  done.disabled = false;
  if (!ok) return form.querySelector('[aria-invalid="true"]')?.focus();
  showNote(state.notes.get(id), 'edit');
  say(statusBox, 'Note saved.');
});

// Leaving the page with a change autosave has not sent yet: the browser asks first.
window.addEventListener('beforeunload', (event) => {
  if ([...editors.values()].some((e) => e.dirty())) event.preventDefault();
});

$('delete-dialog')
  .querySelector('[data-close]')
  .addEventListener('click', () => $('delete-dialog').close());

$('delete-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const dialog = $('delete-dialog');
  try {
    await authorized(`/notes/${encodeURIComponent(deleting.id)}`, { method: 'DELETE' });
  } catch (err) {
    // Gone already (another tab): the list is out of date, so it is reloaded as after a delete.
    if (err.status !== 404) return handle(err, $('delete-error'));
  }
  editors.get(String(deleting.id))?.stop();
  editors.delete(String(deleting.id));
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
  const problem = !title.trim() ? { input: form.elements.title, text: 'Enter a title.' } : overLimit(form);
  markInvalid(form.elements.title, problem?.input === form.elements.title);
  markInvalid(form.elements.body, problem?.input === form.elements.body);
  if (problem) {
    say(errorOut, problem.text);
    return problem.input.focus();
  }
  const body = { title };
  if (form.elements.body.value !== '') body.body = form.elements.body.value;
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  try {
    await authorized('/notes', { method: 'POST', body });
    form.reset();
    for (const input of form.querySelectorAll('input, textarea')) count(input);
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

// ---- start: resume this browser's session, if it has one ----------------------------------------

try {
  if (await resume()) await enter();
  else if (signedOutBox.hidden) showSignedOut('');
} catch (err) {
  showSignedOut('');
  say($('page-error'), `Your session could not be restored. ${explain(err)}`);
}
