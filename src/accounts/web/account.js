import { ApiError, el, formatInstant, say } from '/assets/api.js';
import { authApi, endSession, readable, refreshToken, requireSignIn, startSession } from '/assets/accounts/session.js';

const statusBox = document.getElementById('account-status');
const errorBox = document.getElementById('account-error');
const sessionsBody = document.querySelector('#sessions-table tbody');
const sessionsError = document.getElementById('sessions-error');
const passwordForm = document.getElementById('password-form');

function showProfile(user) {
  document.getElementById('profile-name').textContent = user.name;
  document.getElementById('profile-email').textContent = user.email;
  const verified = document.getElementById('profile-verified');
  verified.textContent = user.emailVerified ? 'verified' : 'not verified';
  verified.className = `badge ${user.emailVerified ? 'active' : 'disabled'}`;
  document.getElementById('profile-verify-link').hidden = user.emailVerified;
  document.getElementById('profile-role').textContent = user.role;
  document.getElementById('profile-created').textContent = formatInstant(user.createdAt);
  document.getElementById('password-username').value = user.email;
}

async function loadProfile() {
  const { data } = await authApi('/auth/me');
  showProfile(data);
}

async function loadSessions() {
  say(sessionsError, '');
  const { data } = await authApi('/auth/sessions');
  sessionsBody.replaceChildren(...data.map(sessionRow));
}

function sessionRow(session) {
  const browser = session.user_agent ?? 'unknown';
  return el(
    'tr',
    { 'data-session': session.id },
    el('td', { 'data-label': 'Signed in' }, formatInstant(session.created_at)),
    el('td', { 'data-label': 'Last used' }, formatInstant(session.last_used_at)),
    el('td', { class: 'break', 'data-label': 'Address' }, session.ip ?? 'unknown'),
    el('td', { class: 'break', 'data-label': 'Browser' }, browser),
    el(
      'td',
      { 'data-label': 'Actions' },
      el('button', { type: 'button', class: 'small secondary', 'data-action': 'revoke', 'aria-label': `End session: signed in ${formatInstant(session.created_at)} from ${session.ip ?? 'an unknown address'}, ${browser}` }, 'End session'),
    ),
  );
}

sessionsBody.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-action="revoke"]');
  if (!button) return;
  const id = button.closest('tr').dataset.session;
  button.disabled = true;
  try {
    await authApi(`/auth/sessions/${encodeURIComponent(id)}`, { method: 'DELETE' });
    say(statusBox, 'Session ended.');
    await loadSessions();
  } catch (err) {
    button.disabled = false;
    say(sessionsError, err.message);
  }
});

passwordForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  const errorOut = document.getElementById('password-error');
  say(errorOut, '');
  say(document.getElementById('password-status'), '');
  const current = passwordForm.current_password.value;
  const next = passwordForm.new_password.value;
  if (!current || !next) return say(errorOut, 'Enter your current password and the new one.');
  if (next !== passwordForm.confirm_password.value) {
    passwordForm.confirm_password.focus();
    return say(errorOut, 'The two new passwords differ.');
  }
  const button = document.getElementById('password-button');
  button.disabled = true;
  try {
    // A new session comes back: this tab stays signed in, every other session has ended.
    const { data } = await authApi('/auth/password', { method: 'POST', body: { current_password: current, new_password: next } });
    startSession(data);
    passwordForm.reset();
    say(document.getElementById('password-status'), 'Password changed. Every other session has been signed out.');
    await loadSessions();
  } catch (err) {
    say(errorOut, readable(err.message));
  } finally {
    button.disabled = false;
  }
});

async function signOut(body, query) {
  try {
    await authApi('/auth/logout', { method: 'POST', body });
  } catch (err) {
    // Already signed out on the server (401): the tab forgets its tokens all the same.
    if (!(err instanceof ApiError) || err.status !== 401) return say(errorBox, err.message);
  }
  endSession();
  location.assign(`/?${query}`);
}

document.getElementById('sign-out').addEventListener('click', () => signOut({ refresh_token: refreshToken() }, 'signed_out=1'));
document.getElementById('sign-out-everywhere').addEventListener('click', () => signOut({ scope: 'global' }, 'signed_out=everywhere'));

async function start() {
  let user;
  try {
    user = await requireSignIn();
  } catch (err) {
    return say(errorBox, err.message);
  }
  if (!user) return;
  if (new URLSearchParams(location.search).has('welcome')) say(statusBox, `Welcome, ${user.name}. Your account is ready.`);
  showProfile(user);
  document.getElementById('account').hidden = false;
  try {
    await Promise.all([loadProfile(), loadSessions()]);
  } catch (err) {
    say(errorBox, err.message);
  }
}

start();
