import { ApiError, say } from '/assets/api.js';
import { request, tokenClaims } from '/assets/notes/session.js';

// Where the identity provider's recovery link lands. The provider puts the
// outcome in the URL fragment, which never reaches a server:
//   #access_token=…&refresh_token=…&expires_at=…&type=recovery  (a session for this one change), or
//   #error=…&error_code=…&error_description=…                   (expired, used or unknown link).
// The fragment is wiped from the address bar and history at once; the access
// token stays in this module's memory only, and the session ends after the change.

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.hash.slice(1));
history.replaceState(null, '', location.pathname);
const accessToken = params.get('access_token');
const type = params.get('type');
$('loading').hidden = true;

function problem(text) {
  $('problem-text').textContent = text;
  $('reset-form').hidden = true;
  $('link-problem').hidden = false;
}

if (params.has('error') || params.has('error_code')) {
  const description = (params.get('error_description') ?? '').replace(/\.+$/, '');
  problem(`${description ? `${description}. ` : ''}Reset links work once and for a limited time; ask for a new one.`);
} else if (!accessToken || (type !== null && type !== 'recovery')) {
  problem('This page opens from the link in a password-reset email. Ask for a new link to get one.');
} else {
  const email = tokenClaims(accessToken).email;
  if (email) $('username').value = email;
  $('reset-form').hidden = false;
  $('password').focus();
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
    if (err instanceof ApiError && err.status === 401) return problem('This reset link has expired or was already used.');
    $('password').setAttribute('aria-invalid', 'true');
    say(errorBox, err.message);
    return $('password').focus();
  }
  // The recovery session has done its job: end it, so its tokens are worth nothing (a failure changes nothing for the user).
  await request('/auth/logout', { method: 'POST', token: accessToken }).catch(() => {});
  form.hidden = true;
  $('done').hidden = false;
  $('done-title').focus();
});
