import { ApiError, formatWait, say } from '/assets/api.js';
import { request, tokenClaims } from '/assets/notes/session.js';

// Where a recovery mail's link lands, in one of two forms:
// - ?token_hash=…&type=recovery: the link as notes' mails carry it. Opening it spends nothing (a mail
//   scanner that fetches it changes nothing); the token is used by POST /auth/verify only when the
//   person presses Continue, which gives the session for this one change.
// - #access_token=…&type=recovery, or #error=…: the provider's own link (GET /verify) already used
//   the token and put the outcome in the fragment, which never reaches a server.
// Either is wiped from the address bar and history at once; the access token stays in this
// module's memory only, and the session ends after the change.

const $ = (id) => document.getElementById(id);
const query = new URLSearchParams(location.search);
const fragment = new URLSearchParams(location.hash.slice(1));
history.replaceState(null, '', location.pathname);
const tokenHash = query.get('token_hash');
let accessToken = fragment.get('access_token');
$('loading').hidden = true;

const AGAIN = 'Reset links work once and for a limited time; ask for a new one.';

function problem(text) {
  $('problem-text').textContent = text;
  $('continue-form').hidden = true;
  $('reset-form').hidden = true;
  $('link-problem').hidden = false;
}

/** The words for a refusal: what happened and what to do, never the API's own text. */
function inWords(err, doing) {
  if (!(err instanceof ApiError)) return `Something went wrong while ${doing}. Try again.`;
  if (err.status === 0) return err.message; // already in words: the service could not be reached
  if (err.status === 429) {
    return err.retryAfter
      ? `Too many attempts from here. Try again in ${formatWait(err.retryAfter)}.`
      : 'Too many attempts from here. Try again later.';
  }
  if (err.status >= 500) return `The service could not finish ${doing} just now. Try again in a few minutes.`;
  return `The service refused ${doing}. Try again.`;
}

function showPasswordForm() {
  const email = tokenClaims(accessToken).email;
  if (email) $('username').value = email;
  $('continue-form').hidden = true;
  $('reset-form').hidden = false;
  $('password').focus();
}

if (fragment.has('error') || fragment.has('error_code')) {
  problem(`This reset link has expired or was already used. ${AGAIN}`);
} else if (tokenHash && query.get('type') === 'recovery') {
  $('continue-form').hidden = false;
  $('continue-form').querySelector('button').focus();
} else if (!accessToken || (fragment.get('type') !== null && fragment.get('type') !== 'recovery')) {
  problem('This page opens from the link in a password-reset email. Ask for a new link to get one.');
} else {
  showPasswordForm();
}

$('continue-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const errorBox = $('continue-error');
  const button = event.currentTarget.querySelector('button');
  say(errorBox, '');
  button.disabled = true;
  try {
    const { data } = await request('/auth/verify', { method: 'POST', body: { token_hash: tokenHash, type: 'recovery' } });
    accessToken = data.access_token;
  } catch (err) {
    button.disabled = false;
    if (err instanceof ApiError && (err.status === 401 || err.status === 400))
      return problem(`This reset link has expired or was already used. ${AGAIN}`);
    return say(errorBox, inWords(err, 'checking the link'));
  }
  showPasswordForm();
});

/** The words for a password the service refused (400), by the reason it gives. */
function passwordRefusal(message) {
  if (/common/i.test(message)) return 'This password is one of the most commonly used ones. Choose one that is harder to guess.';
  if (/weak|at least/i.test(message)) return 'This password is too short. Use at least 6 characters; a long passphrase is best.';
  if (/different|current/i.test(message)) return 'This is your current password. Choose a new one.';
  return 'This password cannot be used. Try a longer one.';
}

$('reset-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const errorBox = $('reset-error');
  const password = $('password').value;
  const confirm = $('confirm').value;
  say(errorBox, '');
  $('password').removeAttribute('aria-invalid');
  $('confirm').removeAttribute('aria-invalid');
  if (!password) {
    $('password').setAttribute('aria-invalid', 'true');
    say(errorBox, 'Enter a new password.');
    return $('password').focus();
  }
  if (password !== confirm) {
    $('confirm').setAttribute('aria-invalid', 'true');
    say(errorBox, 'The two passwords differ. Type the same one twice.');
    return $('confirm').focus();
  }
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  try {
    await request('/auth/password', { method: 'POST', body: { password }, token: accessToken });
  } catch (err) {
    button.disabled = false;
    if (err instanceof ApiError && err.status === 401) return problem(`This reset link has expired or was already used. ${AGAIN}`);
    if (err instanceof ApiError && err.status === 400) {
      $('password').setAttribute('aria-invalid', 'true');
      say(errorBox, passwordRefusal(err.message));
      return $('password').focus();
    }
    return say(errorBox, inWords(err, 'changing the password'));
  }
  // The recovery session has done its job: end it, so its tokens are worth nothing (a failure changes nothing for the user).
  await request('/auth/logout', { method: 'POST', token: accessToken }).catch(() => {});
  form.hidden = true;
  $('done').hidden = false;
  $('done-title').focus();
});
