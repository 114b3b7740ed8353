import { ApiError, api, say } from '/assets/api.js';
import { explain, fieldProblems, signIn, waitOutLimit } from '/assets/accounts/session.js';

const form = document.getElementById('register-form');
const button = document.getElementById('register-button');
const errorBox = document.getElementById('register-error');
const FIELDS = ['name', 'email', 'password'];
// What the service checks too, checked here first so every field is told at once, before anything is sent.
const EMAIL = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;
const characters = (text) => [...text].length;

/** The problems of the form as typed, by field: the service's rules, in words. */
function problemsAsTyped(name, email, password) {
  const problems = {};
  const nameLength = characters(name.trim());
  if (nameLength < 2 || nameLength > 60) problems.name = 'The name must be 2 to 60 characters long.';
  if (!EMAIL.test(email)) problems.email = 'Enter a valid email address, such as name@example.com.';
  const length = characters(password);
  if (length < 8 || length > 72) problems.password = 'The password must be 8 to 72 characters long.';
  else if (new TextEncoder().encode(password).length > 72)
    problems.password =
      'The password is too long: accents and emoji take more room, and at most 72 bytes fit. Use fewer of them, or a shorter password.';
  return problems;
}

/** Every field's problem under it at once, the first such field focused; a summary above the form. */
function showProblems(problems) {
  const fields = FIELDS.filter((f) => problems[f]);
  for (const field of FIELDS) {
    const input = form.elements.namedItem(field);
    const out = document.getElementById(`${field}-error`);
    say(out, problems[field] ?? '');
    if (problems[field]) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
  }
  if (fields.length === 0) return false;
  say(errorBox, fields.length === 1 ? 'Check the field marked below.' : `Check the ${fields.length} fields marked below.`);
  form.elements.namedItem(fields[0]).focus();
  return true;
}

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(errorBox, '');
  const body = { name: form.name.value, email: form.email.value.trim(), password: form.password.value };
  if (showProblems(problemsAsTyped(body.name, body.email, body.password))) return;
  button.disabled = true;
  try {
    await api('/auth/register', { method: 'POST', body });
  } catch (err) {
    button.disabled = false;
    if (waitOutLimit(err, button, errorBox, 'Too many accounts were registered from your address. You can register another in')) return;
    if (!showProblems(fieldProblems(err))) say(errorBox, explain(err));
    return;
  }
  // Registered: sign in with the same credentials, so the next page is the account.
  try {
    await signIn(body.email, body.password);
    location.assign('/account?welcome=1');
  } catch (err) {
    form.hidden = true;
    if (err instanceof ApiError && err.status === 403) {
      // The service wants the address verified before the first sign-in: the mail is on its way.
      return say(
        document.getElementById('register-status'),
        `Your account is created. Follow the link sent to ${body.email} to verify the address, then sign in.`,
      );
    }
    say(document.getElementById('register-status'), 'Your account is created. Sign in to continue.');
  }
});
