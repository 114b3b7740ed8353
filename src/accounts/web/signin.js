import { ApiError, api, countDown, say } from '/assets/api.js';
import { explain, resumeSession, returnPage, signIn, signInWithCode } from '/assets/accounts/session.js';

const form = document.getElementById('signin-form');
const button = document.getElementById('signin-button');
const errorBox = document.getElementById('signin-error');
const statusBox = document.getElementById('signin-status');
const verifyHint = document.getElementById('signin-verify');
const factorForm = document.getElementById('factor-form');
const factorButton = document.getElementById('factor-button');
const factorError = document.getElementById('factor-error');
/** The challenge of a right password for an account with two-step sign-in. */
let challenge;
const params = new URLSearchParams(location.search);
let locked = false;

// Sign-in by mail is offered only when the service has it on.
api('/auth/email-signin').then(
  ({ data }) => {
    if (data?.enabled === true) document.getElementById('email-signin-offer').hidden = false;
  },
  () => {},
);

if (params.has('signed_out')) say(statusBox, 'You are signed out.');
if (params.has('ended')) say(statusBox, 'Your session has ended. Sign in again.');
if (params.has('again')) say(statusBox, 'For your security, sign in again to continue.');
if (params.has('ended_here')) say(statusBox, 'You ended the session of this browser, so you are signed out.');

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  if (locked) return;
  say(errorBox, '');
  verifyHint.hidden = true;
  const email = form.email.value.trim();
  const password = form.password.value;
  if (!email || !password) return say(errorBox, 'Enter your email address and your password.');
  button.disabled = true;
  try {
    const outcome = await signIn(email, password);
    if (outcome.challenge) return askForCode(outcome.challenge);
    location.assign(returnPage(params.get('next'), outcome));
  } catch (err) {
    button.disabled = false;
    if (err instanceof ApiError && err.status === 429) return lockOut(err.retryAfter ?? 60);
    say(errorBox, explain(err));
    // The 403 of an address not verified yet (when the service requires it), as against a ban.
    verifyHint.hidden = !(err instanceof ApiError && err.status === 403 && /verify/i.test(err.message));
    form.password.select();
  }
});

/** The second step: the password form gives way to the code form. */
function askForCode(value) {
  challenge = value;
  form.hidden = true;
  factorForm.hidden = false;
  say(factorError, '');
  factorForm.code.value = '';
  factorForm.code.focus();
}

factorForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  say(factorError, '');
  const typed = factorForm.code.value.trim();
  if (!typed) return say(factorError, 'Enter the code from your authenticator app, or a recovery code.');
  factorButton.disabled = true;
  try {
    const user = await signInWithCode(challenge, typed);
    location.assign(returnPage(params.get('next'), user));
  } catch (err) {
    factorButton.disabled = false;
    // A spent or expired challenge: the password must be given again.
    if (err instanceof ApiError && err.status === 401 && /challenge/.test(err.message)) {
      factorForm.hidden = true;
      form.hidden = false;
      button.disabled = false;
      form.password.value = '';
      form.password.focus();
      return say(errorBox, 'The sign-in took too long or had too many wrong codes. Enter your password again.');
    }
    say(
      factorError,
      err instanceof ApiError && err.status === 401 ? 'That code is not right. Check your app and try again.' : explain(err),
    );
    factorForm.code.select();
  }
});

/** Too many failed sign-ins: the button stays off, the wait counted down in words, until the limit lets go. */
function lockOut(seconds) {
  locked = true;
  countDown(
    button,
    seconds,
    (wait) => say(errorBox, `Too many failed sign-ins for this account or from your address. You can try again in ${wait}.`),
    () => {
      locked = false;
      say(errorBox, '');
    },
  );
}

// Signed in already in this browser: straight on, unless the page says the session just ended.
resumeSession()
  .then((user) => {
    if (user && !params.has('ended') && !params.has('signed_out') && !params.has('ended_here'))
      location.replace(returnPage(params.get('next'), user));
  })
  .catch(() => {});
