import { ApiError, el, formatInstant, say } from '/assets/api.js';
import {
  addPasskey,
  authApi,
  changePassword,
  currentSessionId,
  endSession,
  explain,
  fieldProblems,
  needsRecentSignIn,
  passkeyDialogDismissed,
  passkeysSupported,
  requireSignIn,
  signInAgain,
  signOut,
} from '/assets/accounts/session.js';
import { confirmed } from '/assets/accounts/confirm-dialog.js';

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
  // This browser's session first, then the others as listed (newest first).
  const here = currentSessionId();
  const ordered = [...data.filter((s) => s.id === here), ...data.filter((s) => s.id !== here)];
  sessionsBody.replaceChildren(...ordered.map(sessionRow));
}

/** An address that may wrap only between its groups (after a dot or colon), never inside a number. */
const address = (ip) => (ip ?? 'unknown').split(/(?<=[.:])/).flatMap((part) => [part, el('wbr')]);

function sessionRow(session) {
  const browser = session.device ?? session.user_agent ?? 'Unknown browser';
  const here = session.id === currentSessionId();
  return el(
    'tr',
    { 'data-session': session.id, class: here ? 'current' : undefined },
    el(
      'td',
      { 'data-label': 'Browser' },
      el('span', { class: 'wrap' }, browser),
      here ? [' ', el('span', { class: 'badge active' }, 'this browser')] : [],
    ),
    el('td', { 'data-label': 'Signed in' }, formatInstant(session.created_at)),
    el('td', { 'data-label': 'Last used' }, formatInstant(session.last_used_at)),
    el('td', { class: 'address', 'data-label': 'Address' }, address(session.ip)),
    el(
      'td',
      { 'data-label': 'Actions' },
      el(
        'button',
        {
          type: 'button',
          class: 'small secondary',
          'data-action': 'revoke',
          'aria-label': here
            ? 'End the session of this browser (signs you out here)'
            : `End session: ${browser}, signed in ${formatInstant(session.created_at)} from ${session.ip ?? 'an unknown address'}`,
        },
        here ? 'End (sign out)' : 'End session',
      ),
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
  } catch (err) {
    button.disabled = false;
    return say(sessionsError, explain(err));
  }
  if (id === currentSessionId()) {
    // This browser's own session: signed out at once, not when the access token runs out.
    endSession();
    return location.assign('/?ended_here=1');
  }
  say(statusBox, 'Session ended: that browser is signed out.');
  await loadSessions().catch((err) => say(sessionsError, explain(err)));
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
    return say(errorOut, 'The two new passwords differ. Type the same one twice.');
  }
  const button = document.getElementById('password-button');
  button.disabled = true;
  try {
    // A new session comes back: this browser stays signed in, every other session has ended.
    await changePassword(current, next);
    passwordForm.reset();
    say(document.getElementById('password-status'), 'Password changed. Every other session has been signed out.');
    await loadSessions();
  } catch (err) {
    const problems = fieldProblems(err);
    say(errorOut, problems.new_password ?? explain(err));
    if (problems.new_password) passwordForm.new_password.focus();
  } finally {
    button.disabled = false;
  }
});

async function leave(everywhere) {
  try {
    await signOut(everywhere);
  } catch (err) {
    return say(errorBox, explain(err));
  }
  location.assign(`/?signed_out=${everywhere ? 'everywhere' : '1'}`);
}

document.getElementById('sign-out').addEventListener('click', () => leave(false));
document.getElementById('sign-out-everywhere').addEventListener('click', () => leave(true));

// ---- two-step sign-in (TOTP and recovery codes) --------------------------------------------------

const totp = {
  state: document.getElementById('totp-state'),
  reauth: document.getElementById('totp-reauth'),
  error: document.getElementById('totp-error'),
  status: document.getElementById('totp-status'),
  off: document.getElementById('totp-off'),
  on: document.getElementById('totp-on'),
  enrol: document.getElementById('totp-enrol'),
  enrolError: document.getElementById('totp-enrol-error'),
  codes: document.getElementById('totp-codes'),
  codeList: document.getElementById('totp-code-list'),
};
/** The recovery codes being shown (once): kept only until the person says they are saved. */
let shownCodes = [];
/** The key of the enrolment under way, without spaces, for the copy button. */
let enrolSecret = '';

/** The last status of GET /auth/factors, and how many passkeys the account has: together they say what a password sign-in asks. */
let totpStatus;
let passkeyCount = 0;

function describeTotp() {
  if (!totpStatus) return;
  const enabled = totpStatus.totp.enabled;
  const left = totpStatus.recovery_codes_remaining;
  totp.state.textContent = enabled
    ? `Two-step sign-in is on since ${formatInstant(totpStatus.totp.confirmed_at)}: signing in asks for your password and a code from your authenticator app. ${left} of 10 recovery codes left.`
    : passkeyCount > 0
      ? 'Two-step sign-in is off for an authenticator app: after your password, signing in asks for one of your passkeys. Turn it on to accept a code from an authenticator app as well.'
      : 'Two-step sign-in is off: your password alone signs you in. Turn it on to ask for a code from an authenticator app as well.';
  totp.state.classList.toggle('muted', !enabled);
}

/** Shows the part of the section for a status of GET /auth/factors, and hides the others. */
function showTotpStatus(status) {
  totpStatus = status;
  const enabled = status.totp.enabled;
  describeTotp();
  totp.off.hidden = enabled;
  // While recovery codes are shown, their own buttons come first.
  totp.on.hidden = !enabled || !totp.codes.hidden;
  totp.enrol.hidden = true;
}

async function loadTotp() {
  const { data } = await authApi('/auth/factors');
  showTotpStatus(data);
}

/** A refusal of a factor change in words; a sign-in too old for it offers a new sign-in instead (step-up). */
function totpFailed(err, box = totp.error) {
  if (needsRecentSignIn(err)) {
    totp.reauth.hidden = false;
    document.getElementById('totp-reauth-button').focus();
    return;
  }
  say(box, explain(err));
}

function clearTotpMessages() {
  say(totp.error, '');
  say(totp.status, '');
  say(totp.enrolError, '');
  totp.reauth.hidden = true;
}

/** "ABCDEFGH…" as "ABCD EFGH …": easier to read and to type. */
const inFours = (text) => text.replace(/(.{4})(?=.)/g, '$1 ');

/**
 * A button of the TOTP section: the section's messages cleared, the question (when there is one)
 * confirmed first, the button off while `change` runs, and a refusal told in the section.
 */
function onTotpButton(id, change, question) {
  document.getElementById(id).addEventListener('click', async (event) => {
    const button = event.currentTarget;
    clearTotpMessages();
    if (question && !(await confirmed(question))) return button.focus();
    button.disabled = true;
    try {
      await change();
    } catch (err) {
      totpFailed(err);
    } finally {
      button.disabled = false;
    }
  });
}

onTotpButton('totp-start', async () => {
  const { data } = await authApi('/auth/factors/totp', { method: 'POST' });
  enrolSecret = data.secret;
  document.getElementById('totp-qr').src = data.otpauth_qr;
  document.getElementById('totp-secret').textContent = inFours(data.secret);
  totp.enrol.code.value = '';
  totp.off.hidden = true;
  totp.enrol.hidden = false;
  totp.enrol.code.focus();
});

totp.enrol.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(totp.enrolError, '');
  const code = totp.enrol.code.value.replace(/\s/g, '');
  if (!/^\d{6}$/.test(code)) {
    totp.enrol.code.focus();
    return say(totp.enrolError, 'Enter the 6 digits your authenticator app shows now.');
  }
  const button = document.getElementById('totp-confirm');
  button.disabled = true;
  try {
    const { data } = await authApi('/auth/factors/totp/confirm', { method: 'POST', body: { code } });
    enrolSecret = '';
    totp.enrol.hidden = true;
    document.getElementById('totp-secret').textContent = '';
    document.getElementById('totp-qr').removeAttribute('src');
    say(totp.status, 'Two-step sign-in is on. From now on, signing in asks for a code from your app.');
    showCodes(data.recovery_codes);
    await loadTotp();
  } catch (err) {
    // A wrong code (400) keeps the step: the same QR code and key, another try.
    if (err instanceof ApiError && err.status === 400 && /pending/.test(err.message))
      say(totp.enrolError, 'This setup has expired (it lasts 10 minutes). Cancel, and turn it on again for a new QR code.');
    else if (err instanceof ApiError && err.status === 400)
      say(totp.enrolError, 'That code is not right. Check that the app shows the code for this account, and type the one shown now.');
    else totpFailed(err, totp.enrolError);
    totp.enrol.code.select();
  } finally {
    button.disabled = false;
  }
});

document.getElementById('totp-cancel').addEventListener('click', () => {
  // The pending setup is left as it is: it is no factor, and a new "Turn on" replaces its key.
  enrolSecret = '';
  clearTotpMessages();
  totp.enrol.hidden = true;
  totp.off.hidden = false;
  document.getElementById('totp-start').focus();
});

document.getElementById('totp-copy-secret').addEventListener('click', () => copy(enrolSecret, 'Key copied.', totp.enrolError));

/** The ten recovery codes, this once, until the person says they are saved. */
function showCodes(codes) {
  shownCodes = codes;
  totp.codeList.replaceChildren(...codes.map((c) => el('li', {}, c)));
  totp.codes.hidden = false;
  totp.on.hidden = true;
  document.getElementById('totp-codes-title').focus();
}

const codesAsText = () =>
  `Recovery codes for ${document.getElementById('profile-email').textContent} (${location.host})\nEach one signs you in once.\n\n${shownCodes.join('\n')}\n`;

document.getElementById('totp-copy-codes').addEventListener('click', () => copy(codesAsText(), 'Recovery codes copied.', totp.error));

document.getElementById('totp-download-codes').addEventListener('click', () => {
  const url = URL.createObjectURL(new Blob([codesAsText()], { type: 'text/plain;charset=utf-8' }));
  const link = el('a', { href: url, download: 'recovery-codes.txt', hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
});

document.getElementById('totp-codes-done').addEventListener('click', () => {
  shownCodes = [];
  totp.codeList.replaceChildren();
  totp.codes.hidden = true;
  totp.on.hidden = false;
  say(totp.status, '');
  document.getElementById('totp-new-codes').focus();
});

async function copy(text, done, errorBox) {
  try {
    await navigator.clipboard.writeText(text);
    say(totp.status, done);
  } catch {
    say(errorBox, 'This browser did not allow copying. Select the text and copy it yourself.');
  }
}

document.getElementById('confirm-cancel').addEventListener('click', () => document.getElementById('confirm-dialog').close());

onTotpButton(
  'totp-new-codes',
  async () => {
    const { data } = await authApi('/auth/factors/recovery-codes', { method: 'POST' });
    say(totp.status, 'New recovery codes made. The old ones no longer work.');
    showCodes(data.recovery_codes);
    await loadTotp();
  },
  {
    title: 'Make new recovery codes?',
    text: 'Ten new codes replace your current ones: the old codes stop working at once.',
    button: 'Make new codes',
  },
);

onTotpButton(
  'totp-turn-off',
  async () => {
    await authApi('/auth/factors/totp', { method: 'DELETE' });
    await loadTotp();
    say(totp.status, 'Two-step sign-in is off.');
    document.getElementById('totp-start').focus();
  },
  {
    title: 'Turn off two-step sign-in?',
    text: 'Your password alone will sign you in again, and your recovery codes stop working.',
    button: 'Turn off',
  },
);

document.getElementById('totp-reauth-button').addEventListener('click', () => signInAgain(totp.error));

// ---- passkeys ---------------------------------------------------------------------------------------

const pk = {
  state: document.getElementById('passkeys-state'),
  reauth: document.getElementById('passkeys-reauth'),
  error: document.getElementById('passkeys-error'),
  status: document.getElementById('passkeys-status'),
  tableWrap: document.getElementById('passkeys-table-wrap'),
  body: document.querySelector('#passkeys-table tbody'),
  add: document.getElementById('passkey-add'),
  addError: document.getElementById('passkey-add-error'),
  rename: document.getElementById('passkey-rename'),
  renameError: document.getElementById('passkey-rename-error'),
};
/** The passkey being renamed. */
let renaming;

function passkeyRow(passkey) {
  return el(
    'tr',
    { 'data-passkey': passkey.id },
    el('td', { 'data-label': 'Name' }, el('span', { class: 'wrap' }, passkey.name)),
    el('td', { 'data-label': 'Added' }, formatInstant(passkey.created_at)),
    el('td', { 'data-label': 'Last used' }, passkey.last_used_at ? formatInstant(passkey.last_used_at) : 'Never'),
    el(
      'td',
      { 'data-label': 'Actions' },
      el(
        'button',
        {
          type: 'button',
          class: 'small secondary',
          'data-action': 'rename',
          'data-name': passkey.name,
          'aria-label': `Rename passkey ${passkey.name}`,
        },
        'Rename',
      ),
      ' ',
      el(
        'button',
        {
          type: 'button',
          class: 'small secondary',
          'data-action': 'remove',
          'data-name': passkey.name,
          'aria-label': `Remove passkey ${passkey.name}`,
        },
        'Remove',
      ),
    ),
  );
}

async function loadPasskeys() {
  const { data } = await authApi('/auth/passkeys');
  pk.body.replaceChildren(...data.map(passkeyRow));
  pk.tableWrap.hidden = data.length === 0;
  passkeyCount = data.length;
  describeTotp();
  pk.state.textContent =
    data.length === 0
      ? 'No passkeys yet. A passkey signs you in with your fingerprint, face or screen lock instead of your password, and also answers the second step of a password sign-in.'
      : `${data.length === 1 ? 'One passkey signs' : `${data.length} passkeys sign`} you in without a password; a password sign-in asks for one of them as its second step.`;
  pk.state.classList.toggle('muted', data.length === 0);
}

function clearPasskeyMessages() {
  for (const box of [pk.error, pk.status, pk.addError, pk.renameError]) say(box, '');
  pk.reauth.hidden = true;
}

/** A refusal of a passkey change in words; a sign-in too old for it offers a new sign-in instead (step-up). */
function passkeyFailed(err, box = pk.error) {
  if (needsRecentSignIn(err)) {
    pk.reauth.hidden = false;
    document.getElementById('passkeys-reauth-button').focus();
    return;
  }
  if (passkeyDialogDismissed(err)) return say(box, 'No passkey was made: the browser’s dialog was closed. Try again when ready.');
  say(box, explain(err));
}

pk.add.addEventListener('submit', async (event) => {
  event.preventDefault();
  clearPasskeyMessages();
  const name = pk.add.name.value.trim();
  if (!name) {
    pk.add.name.focus();
    return say(pk.addError, 'Give the passkey a name, such as the device that holds it.');
  }
  const button = document.getElementById('passkey-add-button');
  button.disabled = true;
  try {
    const added = await addPasskey(name);
    pk.add.reset();
    await loadPasskeys();
    say(pk.status, `Passkey “${added.name}” added. You can now sign in with it.`);
  } catch (err) {
    passkeyFailed(err, pk.addError);
  } finally {
    button.disabled = false;
  }
});

pk.body.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-action]');
  if (!button) return;
  clearPasskeyMessages();
  const id = button.closest('tr').dataset.passkey;
  const name = button.dataset.name;
  if (button.dataset.action === 'rename') {
    renaming = { id, button };
    pk.rename.hidden = false;
    pk.rename.name.value = name;
    pk.rename.name.select();
    return;
  }
  const yes = await confirmed({
    title: `Remove passkey “${name}”?`,
    text: 'It will no longer sign you in. The device may still list it; you can delete it there too.',
    button: 'Remove',
  });
  if (!yes) return button.focus();
  button.disabled = true;
  try {
    await authApi(`/auth/passkeys/${encodeURIComponent(id)}`, { method: 'DELETE' });
    await loadPasskeys();
    say(pk.status, `Passkey “${name}” removed.`);
    document.getElementById('passkey-name').focus();
  } catch (err) {
    button.disabled = false;
    passkeyFailed(err);
  }
});

pk.rename.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(pk.renameError, '');
  const name = pk.rename.name.value.trim();
  if (!name) return say(pk.renameError, 'Give the passkey a name.');
  try {
    await authApi(`/auth/passkeys/${encodeURIComponent(renaming.id)}`, { method: 'PATCH', body: { name } });
    pk.rename.hidden = true;
    await loadPasskeys();
    say(pk.status, `Passkey renamed to “${name}”.`);
  } catch (err) {
    say(pk.renameError, explain(err));
  }
});

document.getElementById('passkey-rename-cancel').addEventListener('click', () => {
  pk.rename.hidden = true;
  const row = renaming && pk.body.querySelector(`tr[data-passkey="${CSS.escape(renaming.id)}"] button[data-action="rename"]`);
  row?.focus();
});

document.getElementById('passkeys-reauth-button').addEventListener('click', () => signInAgain(pk.error));

if (!passkeysSupported()) {
  pk.add.hidden = true;
  say(pk.error, 'This browser cannot make passkeys. You can still see and remove those you have.');
}

async function start() {
  let user;
  try {
    user = await requireSignIn();
  } catch (err) {
    return say(errorBox, explain(err));
  }
  if (!user) return;
  if (new URLSearchParams(location.search).has('welcome')) say(statusBox, `Welcome, ${user.name}. Your account is ready.`);
  showProfile(user);
  document.getElementById('account').hidden = false;
  try {
    await Promise.all([loadProfile(), loadSessions(), loadTotp(), loadPasskeys()]);
  } catch (err) {
    say(errorBox, explain(err));
  }
}

start();
