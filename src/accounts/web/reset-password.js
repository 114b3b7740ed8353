import { ApiError, api, say } from '/assets/api.js';
import { takeTokenFromFragment } from '/assets/accounts/fragment.js';
import { endSession, explain, fieldProblems, resumeSession, waitOutLimit } from '/assets/accounts/session.js';

const statusBox = document.getElementById('reset-status');
const errorBox = document.getElementById('reset-error');
const checking = document.getElementById('reset-checking');
const requestForm = document.getElementById('request-form');
const confirmForm = document.getElementById('confirm-form');
const SPENT = 'This reset link is invalid, already used or expired. Ask for a new one below.';
let token = '';

/** A refusal of the request form in words: its 503 means this service sends no mail at all. */
function refusal(err) {
  if (err instanceof ApiError && err.status === 503 && /mail/i.test(err.message))
    return 'Password reset by email is not available on this service. Ask its administrator.';
  return explain(err);
}

/** The link is spent, expired or mistyped: say so, and offer a new one. */
function spent() {
  token = '';
  confirmForm.hidden = true;
  requestForm.hidden = false;
  say(errorBox, SPENT);
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
    say(statusBox, `If ${email} has an account, a link to reset its password is on its way. It works once, for 30 minutes.`);
    button.disabled = false;
  } catch (err) {
    if (waitOutLimit(err, button, errorBox, 'Too many requests from your address. You can ask again in')) return;
    button.disabled = false;
    say(errorBox, refusal(err));
  }
});

confirmForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(errorBox, '');
  const password = confirmForm.new_password.value;
  if (!password) return say(errorBox, 'Enter the new password.');
  if (password !== confirmForm.confirm_password.value) {
    confirmForm.confirm_password.focus();
    return say(errorBox, 'The two passwords differ. Type the same one twice.');
  }
  const button = document.getElementById('confirm-button');
  button.disabled = true;
  try {
    await api('/auth/password-reset/confirm', { method: 'POST', body: { token, new_password: password } });
    // Every session of the account has ended, this browser's too if it had one.
    endSession();
    confirmForm.hidden = true;
    say(statusBox, 'Your password has been changed. Sign in with the new one.');
  } catch (err) {
    button.disabled = false;
    const problem = fieldProblems(err).new_password;
    if (problem) {
      confirmForm.new_password.focus();
      return say(errorBox, problem);
    }
    // Spent since the page checked it (used in another tab, or expired meanwhile).
    if (err instanceof ApiError && err.status === 400) return spent();
    say(errorBox, explain(err));
  }
});

/**
 * A link with a token: checked at once, so a spent one is told before a new
 * password is typed; a working one shows the form, with its account's address.
 */
async function readLink() {
  const fromLink = takeTokenFromFragment();
  if (!fromLink) return;
  say(errorBox, '');
  say(statusBox, '');
  requestForm.hidden = true;
  confirmForm.hidden = true;
  checking.hidden = false;
  try {
    const { data } = await api('/auth/password-reset/check', { method: 'POST', body: { token: fromLink } });
    token = fromLink;
    document.getElementById('confirm-for').textContent = `For the account ${data.email}.`;
    confirmForm.username.value = data.email;
    confirmForm.hidden = false;
    confirmForm.new_password.focus();
  } catch (err) {
    if (err instanceof ApiError && err.status === 400) spent();
    else {
      requestForm.hidden = false;
      say(errorBox, explain(err));
    }
  } finally {
    checking.hidden = true;
  }
}

window.addEventListener('hashchange', readLink);
readLink();
resumeSession().catch(() => {});
