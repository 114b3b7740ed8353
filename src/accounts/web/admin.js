import { ApiError, el, formatInstant, formatNumber, say, settlePage } from '/assets/api.js';
import { authApi, authListing, explain, needsRecentSignIn, requireSignIn, signInAgain } from '/assets/accounts/session.js';
import { confirmed } from '/assets/accounts/confirm-dialog.js';

// Pages of 20 rows on a wide screen; on a phone, where each row is a card, 10, and the audit log folded until asked for.
const narrow = () => matchMedia('(max-width: 47.99rem)').matches;
const perPage = () => (narrow() ? 10 : 20);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const statusBox = document.getElementById('admin-status');
const errorBox = document.getElementById('admin-error');
const auditError = document.getElementById('audit-error');
const usersBody = document.querySelector('#users-table tbody');
const auditBody = document.querySelector('#audit-table tbody');
const users = { q: '', page: 1, last: 1, byId: new Map() };
const audit = { page: 1, last: 1, userId: '', event: '' };
// The listing does not say who is banned; the answers of this page's own changes do.
const banned = new Map();
let me;
let current;

const listing = (path, query) => authListing(`${path}?${new URLSearchParams(query)}`);

/** An email that may wrap after its @ and its dots, never inside a word. */
const email = (address) => address.split(/(?<=[@.])/).flatMap((part) => [part, el('wbr')]);

async function loadUsers() {
  say(errorBox, '');
  // The server searches (q: email or name, any case) and pages the matches.
  const size = perPage();
  const query = { page: String(users.page), per_page: String(size) };
  if (users.q) query.q = users.q;
  const { rows, total } = await listing('/admin/users', query);
  if (!settlePage(users, total, size)) return loadUsers();
  for (const u of rows) users.byId.set(u.id, u);
  document.getElementById('users-total').textContent = `(${formatNumber(total)}${users.q ? ' matching' : ''})`;
  showPager('users', users, total);
  document.getElementById('users-empty').hidden = total > 0;
  usersBody.replaceChildren(...rows.map(userRow));
}

/** "Page 2 of 3" and its buttons; no pager at all for a single page. */
function showPager(name, state, total) {
  document.getElementById(`${name}-pager`).hidden = state.last <= 1;
  document.getElementById(`${name}-page`).textContent = total > 0 ? `Page ${state.page} of ${state.last}` : '';
  document.getElementById(`${name}-prev`).disabled = state.page <= 1;
  document.getElementById(`${name}-next`).disabled = state.page >= state.last;
}

function userRow(user) {
  const isBanned = banned.get(user.id) === true;
  const otherRole = user.role === 'admin' ? 'user' : 'admin';
  const you = user.id === me.id ? ' (you)' : '';
  return el(
    'tr',
    { 'data-user': user.id },
    el(
      'td',
      { class: 'wrap', 'data-label': 'Name' },
      `${user.name}${you}`,
      isBanned ? [' ', el('span', { class: 'badge disabled' }, 'banned')] : [],
    ),
    el('td', { class: 'wrap', 'data-label': 'Email' }, email(user.email)),
    el('td', { 'data-label': 'Role' }, user.role),
    el('td', { 'data-label': 'Registered' }, formatInstant(user.createdAt)),
    el(
      'td',
      { 'data-label': 'Actions' },
      el(
        'div',
        { class: 'actions' },
        el(
          'button',
          { type: 'button', class: 'small secondary', 'data-action': 'role', 'aria-label': `Make ${otherRole}: ${user.email}` },
          otherRole === 'admin' ? 'Make admin' : 'Make user',
        ),
        el(
          'button',
          { type: 'button', class: 'small secondary', 'data-action': 'ban', 'aria-label': `${isBanned ? 'Unban' : 'Ban'} ${user.email}` },
          isBanned ? 'Unban' : 'Ban',
        ),
        el(
          'button',
          { type: 'button', class: 'small secondary', 'data-action': 'audit', 'aria-label': `Audit entries of ${user.email}` },
          'Audit',
        ),
        el('button', { type: 'button', class: 'small danger', 'data-action': 'delete', 'aria-label': `Delete ${user.email}` }, 'Delete'),
      ),
    ),
  );
}

async function change(user, body, done) {
  try {
    const { data } = await authApi(`/admin/users/${user.id}`, { method: 'PATCH', body });
    banned.set(user.id, data.banned);
    say(statusBox, done(data));
    await Promise.all([loadUsers(), loadAudit()]);
  } catch (err) {
    say(statusBox, '');
    if (!askForRecentSignIn(err)) say(errorBox, explain(err));
  }
}

/**
 * A change refused because this sign-in is older than REAUTH_MAX_AGE (step-up): the page offers
 * a new sign-in rather than an error. Whether it was that refusal.
 */
function askForRecentSignIn(err) {
  if (!needsRecentSignIn(err)) return false;
  const box = document.getElementById('admin-reauth');
  box.hidden = false;
  document.getElementById('admin-reauth-button').focus();
  return true;
}

document.getElementById('admin-reauth-button').addEventListener('click', () => signInAgain(errorBox));

/** The changes that give power or take access away are confirmed first; the way back (make user, unban) is not. */
const confirmations = {
  role: (user) => ({
    title: `Make ${user.name} an admin?`,
    text: `${user.email} will see every account and this audit log, and can change, ban and delete accounts, yours included.`,
    button: 'Make admin',
  }),
  ban: (user) => ({
    title: `Ban ${user.name}?`,
    text: `Every session of ${user.email} ends at once, and signing in is refused until the account is unbanned.`,
    button: 'Ban',
  }),
};

usersBody.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-action]');
  if (!button) return;
  const user = users.byId.get(button.closest('tr').dataset.user);
  if (!user) return;
  say(errorBox, '');
  const action = button.dataset.action;
  // Back to the row's button, unless the page now offers a new sign-in, which has the focus.
  const refocus = () => {
    if (!document.getElementById('admin-reauth').hidden) return;
    document.querySelector(`tr[data-user="${user.id}"] button[data-action="${action}"]`)?.focus();
  };
  if (action === 'role') {
    const role = user.role === 'admin' ? 'user' : 'admin';
    if (role === 'admin' && !(await confirmed(confirmations.role(user)))) return refocus();
    await change(user, { role }, (d) => `${d.user.email} is now ${role === 'admin' ? 'an admin' : 'a user'}.`);
    refocus();
  } else if (action === 'ban') {
    const ban = banned.get(user.id) !== true;
    if (ban && !(await confirmed(confirmations.ban(user)))) return refocus();
    await change(user, { banned: ban }, (d) => `${d.user.email} is ${d.banned ? 'banned: every session has ended' : 'no longer banned'}.`);
    refocus();
  } else if (action === 'audit') {
    document.getElementById('audit-details').open = true;
    document.getElementById('audit-user').value = user.email;
    audit.userId = user.id;
    audit.page = 1;
    await loadAudit();
    document.getElementById('audit-title').scrollIntoView();
  } else if (action === 'delete') {
    current = user;
    document.getElementById('delete-name').textContent = user.name;
    document.getElementById('delete-email').textContent = user.email;
    say(document.getElementById('delete-error'), '');
    document.getElementById('delete-dialog').showModal();
  }
});

for (const dialog of document.querySelectorAll('dialog')) {
  dialog.querySelector('[data-close]').addEventListener('click', () => dialog.close());
}
document.getElementById('delete-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const dialog = document.getElementById('delete-dialog');
  try {
    await authApi(`/admin/users/${current.id}`, { method: 'DELETE' });
    dialog.close();
    users.byId.delete(current.id);
    say(statusBox, `${current.email} deleted.`);
    await Promise.all([loadUsers(), loadAudit()]);
  } catch (err) {
    if (needsRecentSignIn(err)) {
      dialog.close();
      askForRecentSignIn(err);
      return;
    }
    // The last admin's 409, or another refusal: told in the dialog, which stays open.
    say(document.getElementById('delete-error'), explain(err));
  }
});

async function loadAudit() {
  say(auditError, '');
  const size = perPage();
  const query = { page: String(audit.page), per_page: String(size) };
  if (audit.userId) query.user_id = audit.userId;
  if (audit.event) query.event = audit.event;
  let result;
  try {
    result = await listing('/admin/audit', query);
  } catch (err) {
    return say(auditError, explain(err));
  }
  audit.last = Math.max(1, Math.ceil(result.total / size));
  document.getElementById('audit-total').textContent = `(${formatNumber(result.total)}${audit.userId || audit.event ? ' matching' : ''})`;
  showPager('audit', audit, result.total);
  document.getElementById('audit-empty').hidden = result.total > 0;
  auditBody.replaceChildren(...result.rows.map(auditRow));
}

/**
 * A user as their email when this page has listed them; else the start of the
 * id, as a button that shows that user's entries (a whole id is a wall of digits).
 */
const who = (id) => {
  if (!id) return '—';
  const known = users.byId.get(id);
  if (known) return email(known.email);
  return el(
    'button',
    { type: 'button', class: 'link', 'data-audit-user': id, 'aria-label': `Audit entries of user ${id}` },
    `user ${id.slice(0, 8)}…`,
  );
};

/** A long hexadecimal value (a hash) shortened to its first 8 digits: enough to tell entries apart, not a wall of digits. */
const shortened = (value) => (typeof value === 'string' && /^[0-9a-f]{32,}$/i.test(value) ? `${value.slice(0, 8)}…` : String(value));

/** An entry's details, one "name: value" per line, names in words. */
function detailsOf(entry) {
  const lines = Object.entries(entry.details).map(([name, value]) => el('div', {}, `${name.replaceAll('_', ' ')}: ${shortened(value)}`));
  return lines.length > 0 ? lines : '—';
}

function auditRow(entry) {
  return el(
    'tr',
    { 'data-entry': entry.id, 'data-event': entry.event },
    el('td', { 'data-label': 'When' }, formatInstant(entry.at)),
    el('td', { 'data-label': 'Event' }, entry.event.replaceAll('_', ' ')),
    el('td', { class: 'wrap', 'data-label': 'By' }, who(entry.actor_id)),
    el('td', { class: 'wrap', 'data-label': 'On' }, who(entry.target_id)),
    el('td', { class: 'address', 'data-label': 'Address' }, entry.ip ? entry.ip.split(/(?<=[.:])/).flatMap((p) => [p, el('wbr')]) : '—'),
    el('td', { class: 'wrap', 'data-label': 'Details' }, detailsOf(entry)),
  );
}

/**
 * The user the audit filter names: an id as it is, an email looked up among the
 * accounts (exactly, any case). Undefined, with the reason shown, when neither.
 */
async function auditUserOf(text) {
  if (!text || UUID.test(text)) return text;
  if (!text.includes('@')) return void say(auditError, 'Enter an email address or a user id.');
  const wanted = text.toLowerCase();
  const { rows } = await listing('/admin/users', { q: wanted, page: '1', per_page: '20' });
  const match = rows.find((u) => u.email === wanted);
  if (!match) return void say(auditError, `No account has the email address ${text}.`);
  users.byId.set(match.id, match);
  return match.id;
}

auditBody.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-audit-user]');
  if (!button) return;
  document.getElementById('audit-user').value = button.dataset.auditUser;
  audit.userId = button.dataset.auditUser;
  audit.page = 1;
  loadAudit();
});

document.getElementById('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  users.q = document.getElementById('q').value.trim();
  users.page = 1;
  say(statusBox, '');
  loadUsers().catch((err) => say(errorBox, explain(err)));
});
for (const [id, step] of [
  ['users-prev', -1],
  ['users-next', 1],
]) {
  document.getElementById(id).addEventListener('click', () => {
    users.page += step;
    loadUsers().catch((err) => say(errorBox, explain(err)));
  });
}
document.getElementById('audit-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  say(auditError, '');
  let userId;
  try {
    userId = await auditUserOf(document.getElementById('audit-user').value.trim());
  } catch (err) {
    return say(auditError, explain(err));
  }
  if (userId === undefined) return;
  audit.userId = userId;
  audit.event = document.getElementById('audit-event').value;
  audit.page = 1;
  loadAudit();
});
document.getElementById('audit-clear').addEventListener('click', () => {
  document.getElementById('audit-user').value = '';
  document.getElementById('audit-event').value = '';
  audit.userId = '';
  audit.event = '';
  audit.page = 1;
  loadAudit();
});
for (const [id, step] of [
  ['audit-prev', -1],
  ['audit-next', 1],
]) {
  document.getElementById(id).addEventListener('click', () => {
    audit.page += step;
    loadAudit();
  });
}

async function start() {
  try {
    me = await requireSignIn();
  } catch (err) {
    return say(errorBox, err instanceof ApiError ? explain(err) : String(err));
  }
  if (!me) return;
  // Checked here rather than by a 403 from the API, which would be an access_denied entry in the audit log.
  if (me.role !== 'admin') return say(errorBox, 'This page is for administrators. Your account has the role user.');
  if (narrow()) document.getElementById('audit-details').open = false;
  document.getElementById('admin').hidden = false;
  try {
    await Promise.all([loadUsers(), loadAudit()]);
  } catch (err) {
    say(errorBox, explain(err));
  }
}

start();
