import { ApiError, api, say } from '/assets/api.js';
import { takeTokenFromFragment } from '/assets/accounts/fragment.js';
import { endSession, readable } from '/assets/accounts/session.js';

const statusBox = document.getElementById('reset-status');
const errorBox = document.getElementById('reset-error');
const requestForm = document.getElementById('request-form');
const confirmForm = document.getElementById('confirm-form');
let token = '';

/** A refusal of the request form in words: its 503 means this service sends no mail at all. */
function refusal(err) {
  if (err instanceof ApiError && err.status === 503) return 'Password reset by email is not available on this service. Ask its administrator.';
  return readable(err.message);
}

requestForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(errorBox, '');
  say(statusBox, '');
  const email = requestForm.email.value.trim();
  if (!email) return say(errorBox, 'Enter your email address.');
  const button = document.getElementById('request-button');
  button.disabled = true;
  try {
    // 202 whether or not the address has an account: the page says the same either way.
    await api('/auth/password-reset', { method: 'POST', body: { email } });
    say(statusBox, `If ${email} has an account, a link to reset its password is on its way. It works once, for a limited time.`);
  } catch (err) {
    say(errorBox, refusal(err));
  } finally {
    button.disabled = false;
  }
});

confirmForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(errorBox, '');
  const password = confirmForm.new_password.value;
  if (!password) return say(errorBox, 'Enter the new password.');
  if (password !== confirmForm.confirm_password.value) {
    confirmForm.confirm_password.focus();
    return say(errorBox, 'The two passwords differ.');
  }
  const button = document.getElementById('confirm-button');
  button.disabled = true;
  try {
    await api('/auth/password-reset/confirm', { method: 'POST', body: { token, new_password: password } });
    // Every session of the account has ended, this tab's too if it had one.
    endSession();
    confirmForm.hidden = true;
    say(statusBox, 'Your password has been changed. Sign in with the new one.');
  } catch (err) {
    button.disabled = false;
    if (err instanceof ApiError && err.status === 400 && !/^body\/new_password/.test(err.message)) {
      // The link is spent, expired or mistyped: offer a new one.
      confirmForm.hidden = true;
      requestForm.hidden = false;
      return say(errorBox, 'This reset link is invalid, already used or expired. Ask for a new one below.');
    }
    // A 503 here is the service busy, not mail: its own words, with the wait.
    say(errorBox, readable(err.message));
  }
});

/** A link with a token shows the new-password form; one opened in this tab already (hashchange) too. */
function readLink() {
  const fromLink = takeTokenFromFragment();
  if (!fromLink) return;
  token = fromLink;
  say(errorBox, '');
  say(statusBox, '');
  requestForm.hidden = true;
  confirmForm.hidden = false;
}

window.addEventListener('hashchange', readLink);
readLink();
