import { ApiError, api, say } from '/assets/api.js';
import { readable, resumeSession, returnPage, startSession } from '/assets/accounts/session.js';

const form = document.getElementById('signin-form');
const button = document.getElementById('signin-button');
const errorBox = document.getElementById('signin-error');
const verifyHint = document.getElementById('signin-verify');
const params = new URLSearchParams(location.search);
const next = returnPage(params.get('next'));

if (params.has('signed_out')) say(document.getElementById('signin-status'), 'You are signed out.');
if (params.has('ended')) say(document.getElementById('signin-status'), 'Your session has ended. Sign in again.');

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(errorBox, '');
  verifyHint.hidden = true;
  const email = form.email.value.trim();
  const password = form.password.value;
  if (!email || !password) return say(errorBox, 'Enter your email and your password.');
  button.disabled = true;
  try {
    const { data } = await api('/auth/login', { method: 'POST', body: { email, password } });
    startSession(data);
    location.assign(next);
  } catch (err) {
    button.disabled = false;
    say(errorBox, err instanceof ApiError && err.status === 400 ? readable(err.message) : err.message);
    // The 403 of an address not verified yet (when the service requires it), as against a ban.
    verifyHint.hidden = !(err instanceof ApiError && err.status === 403 && /verify/i.test(err.message));
    form.password.select();
  }
});

// Signed in already in this tab: straight on, unless the page says the session just ended.
if (!params.has('ended') && !params.has('signed_out')) {
  resumeSession()
    .then((user) => {
      if (user) location.replace(next);
    })
    .catch(() => {});
}
