import { ApiError, api, say } from '/assets/api.js';
import {
  answerWithPasskey,
  explain,
  passkeyDialogDismissed,
  passkeysSupported,
  returnPage,
  signInByMail,
  signInWithCode,
} from '/assets/accounts/session.js';
import { takeTokenFromFragment } from '/assets/accounts/fragment.js';

// Opening the page spends nothing (a mail scanner that follows the link signs nobody in):
// only pressing "Sign in" sends the token.
const statusBox = document.getElementById('mail-status');
const errorBox = document.getElementById('mail-error');
const linkForm = document.getElementById('link-form');
const requestForm = document.getElementById('request-form');
const codeForm = document.getElementById('code-form');
const factorForm = document.getElementById('factor-form');
const token = takeTokenFromFragment();
let email = '';
let challenge;
/** The passkey options of the second step, for an account with passkeys. */
let passkeyOptions;

if (token) {
  linkForm.hidden = false;
  requestForm.hidden = true;
}

/** Signed in, or on to the second factor. */
function done(outcome) {
  if (outcome.challenge) {
    challenge = outcome.challenge;
    passkeyOptions = passkeysSupported() ? outcome.passkey : undefined;
    for (const form of [linkForm, requestForm, codeForm]) form.hidden = true;
    factorForm.hidden = false;
    document.getElementById('factor-passkey-button').hidden = !passkeyOptions;
    if (passkeyOptions && !outcome.methods.includes('totp')) {
      // Passkeys only: no code to type.
      factorForm.querySelector('.field').hidden = true;
      document.getElementById('factor-button').hidden = true;
      document.getElementById('factor-intro').textContent = 'Now use one of your passkeys.';
      document.getElementById('factor-passkey-button').focus();
    } else {
      if (passkeyOptions)
        document.getElementById('factor-intro').textContent =
          'Use one of your passkeys, or enter the 6-digit code your authenticator app shows now, or one of your recovery codes.';
      factorForm.code.focus();
    }
    return;
  }
  location.assign(returnPage(null, outcome));
}

async function attempt(button, work) {
  say(errorBox, '');
  button.disabled = true;
  try {
    done(await work());
  } catch (err) {
    button.disabled = false;
    say(errorBox, err instanceof ApiError && err.status === 401 ? err.message : explain(err));
  }
}

linkForm.addEventListener('submit', (event) => {
  event.preventDefault();
  attempt(document.getElementById('link-button'), () => signInByMail({ token }));
});

requestForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  email = requestForm.email.value.trim();
  if (!email) return say(errorBox, 'Enter your email address.');
  say(errorBox, '');
  try {
    const { data } = await api('/auth/email-signin', { method: 'POST', body: { email }, bare: true });
    say(statusBox, data.message);
    codeForm.hidden = false;
    codeForm.code.focus();
  } catch (err) {
    say(errorBox, explain(err));
  }
});

codeForm.addEventListener('submit', (event) => {
  event.preventDefault();
  attempt(document.getElementById('code-button'), () => signInByMail({ email, code: codeForm.code.value.trim() }));
});

factorForm.addEventListener('submit', (event) => {
  event.preventDefault();
  attempt(document.getElementById('factor-button'), () => signInWithCode(challenge, factorForm.code.value.trim()));
});

document.getElementById('factor-passkey-button').addEventListener('click', (event) =>
  attempt(event.currentTarget, async () => {
    try {
      return await answerWithPasskey(challenge, passkeyOptions);
    } catch (err) {
      if (passkeyDialogDismissed(err)) throw new ApiError(0, 'No passkey was used. Try again when ready.');
      throw err;
    }
  }),
);
