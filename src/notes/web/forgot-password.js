import { say } from '/assets/api.js';
import { request } from '/assets/notes/session.js';

const form = document.getElementById('forgot-form');
const errorBox = document.getElementById('forgot-error');

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
    return say(errorBox, err.message);
  }
  document.getElementById('sent-to').textContent = email;
  form.hidden = true;
  document.getElementById('sent').hidden = false;
  document.getElementById('sent-title').focus();
});
