import { ApiError, api, say, waitOut } from '/assets/api.js';
import {
  answerWithPasskey,
  explain,
  passkeyDialogDismissed,
  passkeysSupported,
  resumeSession,
  returnPage,
  signIn,
  signInWithCode,
  signInWithPasskey,
} from '/assets/accounts/session.js';

const form = document.getElementById('signin-form');
const button = document.getElementById('signin-button');
const errorBox = document.getElementById('signin-error');
const statusBox = document.getElementById('signin-status');
const verifyHint = document.getElementById('signin-verify');
const factorForm = document.getElementById('factor-form');
const factorButton = document.getElementById('factor-button');
const factorError = document.getElementById('factor-error');
/** The challenge of a right password for an account with two-step sign-in, and its passkey options (with passkeys). */
let challenge;
let passkeyOptions;
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
    if (outcome.challenge) return askForSecondStep(outcome);
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

/** The second step: the password form gives way to the code form, a passkey button, or both, as the account has them. */
function askForSecondStep(step) {
  challenge = step.challenge;
  passkeyOptions = passkeysSupported() ? step.passkey : undefined;
  const codes = step.methods.includes('totp');
  form.hidden = true;
  passkeyPanel.hidden = true;
  factorForm.hidden = false;
  document.getElementById('factor-code-part').hidden = !codes;
  document.getElementById('factor-passkey-part').hidden = !passkeyOptions;
  document.getElementById('factor-intro').textContent =
    codes && passkeyOptions
      ? 'Your password was right. Use one of your passkeys, or enter the 6-digit code your authenticator app shows now, or one of your recovery codes.'
      : codes
        ? 'Your password was right. Enter the 6-digit code your authenticator app shows now, or one of your recovery codes.'
        : passkeyOptions
          ? 'Your password was right. Now use one of your passkeys.'
          : 'Your password was right, but this browser cannot use passkeys, the second step your account asks for. Sign in with a browser that can.';
  say(factorError, '');
  factorForm.code.value = '';
  if (codes) factorForm.code.focus();
  else if (passkeyOptions) document.getElementById('factor-passkey-button').focus();
}

/** A spent or expired challenge: back to the password form. */
function startAgain() {
  factorForm.hidden = true;
  form.hidden = false;
  passkeyPanel.hidden = !passkeysSupported();
  button.disabled = false;
  form.password.value = '';
  form.password.focus();
  say(errorBox, 'The sign-in took too long or had too many wrong codes. Enter your password again.');
}

document.getElementById('factor-passkey-button').addEventListener('click', async (event) => {
  const passkeyButton = event.currentTarget;
  say(factorError, '');
  passkeyButton.disabled = true;
  try {
    const user = await answerWithPasskey(challenge, passkeyOptions);
    location.assign(returnPage(params.get('next'), user));
  } catch (err) {
    passkeyButton.disabled = false;
    if (err instanceof ApiError && err.status === 401 && /challenge/.test(err.message)) return startAgain();
    if (passkeyDialogDismissed(err)) return say(factorError, 'No passkey was used. Try again, or use another way if your account has one.');
    say(factorError, err instanceof ApiError && err.status === 401 ? 'That passkey was not accepted. Try another one.' : explain(err));
  }
});

// ---- sign-in with a passkey alone ----------------------------------------------------------------

const passkeyPanel = document.getElementById('passkey-signin');
const passkeyError = document.getElementById('passkey-signin-error');
passkeyPanel.hidden = !passkeysSupported();

document.getElementById('passkey-signin-button').addEventListener('click', async (event) => {
  const passkeyButton = event.currentTarget;
  say(passkeyError, '');
  passkeyButton.disabled = true;
  try {
    const user = await signInWithPasskey();
    location.assign(returnPage(params.get('next'), user));
  } catch (err) {
    passkeyButton.disabled = false;
    if (passkeyDialogDismissed(err)) return say(passkeyError, 'No passkey was used. Try again, or sign in with your email and password.');
    say(
      passkeyError,
      err instanceof ApiError && err.status === 401
        ? 'That passkey is not registered here, or the sign-in took too long. Try again, or sign in with your email and password.'
        : explain(err),
    );
  }
});

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
    if (err instanceof ApiError && err.status === 401 && /challenge/.test(err.message)) return startAgain();
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
  waitOut(button, seconds, errorBox, 'Too many failed sign-ins for this account or from your address. You can try again in', () => {
    locked = false;
  });
}

// Signed in already in this browser: straight on, unless the page says the session just ended.
resumeSession()
  .then((user) => {
    if (user && !params.has('ended') && !params.has('signed_out') && !params.has('ended_here'))
      location.replace(returnPage(params.get('next'), user));
  })
  .catch(() => {});
