import { ApiError, el, formatInstant, formatNumber, say } from '/assets/api.js';
import { authApi, authListing, readable, requireSignIn } from '/assets/accounts/session.js';

const PER_PAGE = 20;
const statusBox = document.getElementById('admin-status');
const errorBox = document.getElementById('admin-error');
const usersBody = document.querySelector('#users-table tbody');
const auditBody = document.querySelector('#audit-table tbody');
const users = { q: '', page: 1, last: 1, byId: new Map() };
const audit = { page: 1, last: 1, userId: '', event: '' };
// The listing does not say who is banned; the answers of this page's own changes do.
const banned = new Map();
let me;
let current;

const listing = (path, query) => authListing(`${path}?${new URLSearchParams(query)}`);

async function loadUsers() {
  say(errorBox, '');
  // The server searches (q: email or name, any case) and pages the matches.
  const query = { page: String(users.page), per_page: String(PER_PAGE) };
  if (users.q) query.q = users.q;
  const { rows, total } = await listing('/admin/users', query);
  users.last = Math.max(1, Math.ceil(total / PER_PAGE));
  if (users.page > users.last && total > 0) {
    users.page = users.last;
    return loadUsers();
  }
  for (const u of rows) users.byId.set(u.id, u);
  document.getElementById('users-total').textContent = `(${formatNumber(total)}${users.q ? ' matching' : ''})`;
  document.getElementById('users-page').textContent = `Page ${users.page} of ${users.last}`;
  document.getElementById('users-prev').disabled = users.page <= 1;
  document.getElementById('users-next').disabled = users.page >= users.last;
  document.getElementById('users-empty').hidden = total > 0;
  usersBody.replaceChildren(...rows.map(userRow));
}

function userRow(user) {
  const isBanned = banned.get(user.id) === true;
  const otherRole = user.role === 'admin' ? 'user' : 'admin';
  const you = user.id === me.id ? ' (you)' : '';
  return el(
    'tr',
    { 'data-user': user.id },
    el('td', { class: 'break', 'data-label': 'Name' }, `${user.name}${you}`, isBanned ? [' ', el('span', { class: 'badge disabled' }, 'banned')] : []),
    el('td', { class: 'break', 'data-label': 'Email' }, user.email),
    el('td', { 'data-label': 'Role' }, user.role),
    el('td', { 'data-label': 'Registered' }, formatInstant(user.createdAt)),
    el(
      'td',
      { 'data-label': 'Actions' },
      el(
        'div',
        { class: 'actions' },
        el('button', { type: 'button', class: 'small secondary', 'data-action': 'role', 'aria-label': `Make ${otherRole}: ${user.email}` }, otherRole === 'admin' ? 'Make admin' : 'Make user'),
        el('button', { type: 'button', class: 'small secondary', 'data-action': 'ban', 'aria-label': `${isBanned ? 'Unban' : 'Ban'} ${user.email}` }, isBanned ? 'Unban' : 'Ban'),
        el('button', { type: 'button', class: 'small secondary', 'data-action': 'audit', 'aria-label': `Audit entries of ${user.email}` }, 'Audit'),
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
    say(errorBox, readable(err.message));
  }
}

usersBody.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-action]');
  if (!button) return;
  const user = users.byId.get(button.closest('tr').dataset.user);
  if (!user) return;
  say(errorBox, '');
  const action = button.dataset.action;
  if (action === 'role') {
    const role = user.role === 'admin' ? 'user' : 'admin';
    await change(user, { role }, (d) => `${d.user.email} is now ${role === 'admin' ? 'an admin' : 'a user'}.`);
    document.querySelector(`tr[data-user="${user.id}"] button[data-action="role"]`)?.focus();
  } else if (action === 'ban') {
    await change(user, { banned: banned.get(user.id) !== true }, (d) => `${d.user.email} is ${d.banned ? 'banned: every session has ended' : 'no longer banned'}.`);
    document.querySelector(`tr[data-user="${user.id}"] button[data-action="ban"]`)?.focus();
  } else if (action === 'audit') {
    document.getElementById('audit-user').value = user.id;
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

document.querySelector('#delete-dialog [data-close]').addEventListener('click', () => document.getElementById('delete-dialog').close());
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
    // The last admin's 409, or another refusal: told in the dialog, which stays open.
    say(document.getElementById('delete-error'), readable(err.message));
  }
});

async function loadAudit() {
  say(document.getElementById('audit-error'), '');
  const query = { page: String(audit.page), per_page: String(PER_PAGE) };
  if (audit.userId) query.user_id = audit.userId;
  if (audit.event) query.event = audit.event;
  let result;
  try {
    result = await listing('/admin/audit', query);
  } catch (err) {
    return say(document.getElementById('audit-error'), err instanceof ApiError && err.status === 400 ? 'The user id must be a UUID, as shown in the users table.' : err.message);
  }
  audit.last = Math.max(1, Math.ceil(result.total / PER_PAGE));
  document.getElementById('audit-total').textContent = `(${formatNumber(result.total)}${audit.userId || audit.event ? ' matching' : ''})`;
  document.getElementById('audit-page').textContent = `Page ${audit.page} of ${audit.last}`;
  document.getElementById('audit-prev').disabled = audit.page <= 1;
  document.getElementById('audit-next').disabled = audit.page >= audit.last;
  document.getElementById('audit-empty').hidden = result.total > 0;
  auditBody.replaceChildren(...result.rows.map(auditRow));
}

/** A user id as the user's email when this page has listed them, else the id itself. */
const who = (id) => (id ? (users.byId.get(id)?.email ?? id) : '—');

function auditRow(entry) {
  const details = Object.entries(entry.details).map(([k, v]) => `${k}: ${v}`).join(', ');
  return el(
    'tr',
    { 'data-entry': entry.id, 'data-event': entry.event },
    el('td', { 'data-label': 'When' }, formatInstant(entry.at)),
    el('td', { 'data-label': 'Event' }, entry.event),
    el('td', { class: 'break', 'data-label': 'By' }, who(entry.actor_id)),
    el('td', { class: 'break', 'data-label': 'On' }, who(entry.target_id)),
    el('td', { class: 'break', 'data-label': 'Address' }, entry.ip ?? '—'),
    el('td', { class: 'break', 'data-label': 'Details' }, details || '—'),
  );
}

document.getElementById('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  users.q = document.getElementById('q').value.trim();
  users.page = 1;
  say(statusBox, '');
  loadUsers().catch((err) => say(errorBox, err.message));
});
for (const [id, step] of [['users-prev', -1], ['users-next', 1]]) {
  document.getElementById(id).addEventListener('click', () => {
    users.page += step;
    loadUsers().catch((err) => say(errorBox, err.message));
  });
}
document.getElementById('audit-form').addEventListener('submit', (event) => {
  event.preventDefault();
  audit.userId = document.getElementById('audit-user').value.trim();
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
for (const [id, step] of [['audit-prev', -1], ['audit-next', 1]]) {
  document.getElementById(id).addEventListener('click', () => {
    audit.page += step;
    loadAudit();
  });
}

async function start() {
  try {
    me = await requireSignIn();
  } catch (err) {
    return say(errorBox, err.message);
  }
  if (!me) return;
  // Checked here rather than by a 403 from the API, which would be an access_denied entry in the audit log.
  if (me.role !== 'admin') return say(errorBox, 'This page is for administrators. Your account has the role user.');
  document.getElementById('admin').hidden = false;
  try {
    await Promise.all([loadUsers(), loadAudit()]);
  } catch (err) {
    say(errorBox, err.message);
  }
}

start();
