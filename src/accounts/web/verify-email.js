import { ApiError, api, say } from '/assets/api.js';
import { takeTokenFromFragment } from '/assets/accounts/fragment.js';
import { explain, resumeSession, waitOutLimit } from '/assets/accounts/session.js';

const statusBox = document.getElementById('verify-status');
const errorBox = document.getElementById('verify-error');
const resendForm = document.getElementById('resend-form');
const button = document.getElementById('resend-button');

/** A refusal of the resend form in words: its 503 means this service sends no mail at all. */
function refusal(err) {
  if (err instanceof ApiError && err.status === 503 && /SMTP|mail/i.test(err.message))
    return 'Email verification is not available on this service. Ask its administrator.';
  return explain(err);
}

async function verify(token) {
  say(errorBox, '');
  say(statusBox, 'Verifying your email…');
  try {
    await api('/auth/verify-email', { method: 'POST', body: { token } });
    say(statusBox, 'Your email address is verified. Thank you.');
    resendForm.hidden = true;
  } catch (err) {
    say(statusBox, '');
    say(
      errorBox,
      err instanceof ApiError && err.status === 400
        ? 'This verification link is invalid, already used or expired. Ask for a new one below.'
        : explain(err),
    );
  }
}

resendForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(errorBox, '');
  say(statusBox, '');
  const email = resendForm.email.value.trim();
  if (!email) return say(errorBox, 'Enter your email address.');
  button.disabled = true;
  try {
    // 202 whatever the address: the page says the same either way.
    await api('/auth/verify-email/resend', { method: 'POST', body: { email } });
    say(statusBox, `If ${email} has an account waiting for verification, a new link is on its way.`);
    button.disabled = false;
  } catch (err) {
    if (waitOutLimit(err, button, errorBox, 'Too many requests from your address. You can ask again in')) return;
    button.disabled = false;
    say(errorBox, refusal(err));
  }
});

/** A link with a token is verified at once; one opened in this tab already (hashchange) too. */
function readLink() {
  const token = takeTokenFromFragment();
  if (token) verify(token);
}

window.addEventListener('hashchange', readLink);
readLink();
// Signed in: the address to verify is the account's own, filled in (and left editable).
resumeSession()
  .then((user) => {
    if (user && !resendForm.email.value) resendForm.email.value = user.email;
  })
  .catch(() => {});
