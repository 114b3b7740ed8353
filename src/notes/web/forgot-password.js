import { ApiError, formatWait, say } from '/assets/api.js';
import { request } from '/assets/notes/session.js';

const form = document.getElementById('forgot-form');
const errorBox = document.getElementById('forgot-error');

/** The words for a refusal: what happened and what to do, never the API's own text. */
function inWords(err) {
  if (!(err instanceof ApiError)) return 'Something went wrong. Try again.';
  if (err.status === 0) return err.message; // already in words: the service could not be reached
  if (err.status === 400) return 'This does not look like an email address. Check it and try again.';
  if (err.status === 429) {
    return err.retryAfter
      ? `Too many requests from here. Try again in ${formatWait(err.retryAfter)}.`
      : 'Too many requests from here. Try again later.';
  }
  return 'The link could not be sent just now. Try again in a few minutes.';
}

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(errorBox, '');
  const input = form.elements.email;
  const email = input.value.trim();
  if (!email) {
    input.setAttribute('aria-invalid', 'true');
    say(errorBox, 'Enter your email address.');
    return input.focus();
  }
  input.removeAttribute('aria-invalid');
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  try {
    // The same answer whether or not the address has an account, so the page cannot tell either.
    await request('/auth/password-reset', { method: 'POST', body: { email } });
  } catch (err) {
    button.disabled = false;
    if (err instanceof ApiError && err.status === 400) input.setAttribute('aria-invalid', 'true');
    say(errorBox, inWords(err));
    return input.focus();
  }
  document.getElementById('sent-to').textContent = email;
  form.hidden = true;
  document.getElementById('sent').hidden = false;
  document.getElementById('sent-title').focus();
});
