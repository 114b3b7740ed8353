import { ApiError, api, say } from '/assets/api.js';
import { readable, startSession } from '/assets/accounts/session.js';

const form = document.getElementById('register-form');
const button = document.getElementById('register-button');
const errorBox = document.getElementById('register-error');

/** The input a 400's message is about, marked invalid and focused. */
function markField(message) {
  for (const input of form.querySelectorAll('input')) input.removeAttribute('aria-invalid');
  const field = /^body\/(\w+)/.exec(message)?.[1] ?? (/email already exists/.test(message) ? 'email' : undefined);
  const input = field && form.elements.namedItem(field);
  if (input) {
    input.setAttribute('aria-invalid', 'true');
    input.focus();
  }
}

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(errorBox, '');
  const body = { name: form.name.value, email: form.email.value.trim(), password: form.password.value };
  button.disabled = true;
  try {
    await api('/auth/register', { method: 'POST', body });
  } catch (err) {
    button.disabled = false;
    say(errorBox, err instanceof ApiError && err.status === 400 ? readable(err.message) : err.message);
    if (err instanceof ApiError && err.status === 400) markField(err.message);
    return;
  }
  // Registered: sign in with the same credentials, so the next page is the account.
  try {
    const { data } = await api('/auth/login', { method: 'POST', body: { email: body.email, password: body.password } });
    startSession(data);
    location.assign('/account?welcome=1');
  } catch (err) {
    form.hidden = true;
    if (err instanceof ApiError && err.status === 403) {
      // The service wants the address verified before the first sign-in: the mail is on its way.
      return say(document.getElementById('register-status'), `Your account is created. Follow the link sent to ${body.email} to verify the address, then sign in.`);
    }
    say(document.getElementById('register-status'), 'Your account is created. Sign in to continue.');
  }
});
