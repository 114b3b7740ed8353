import { ApiError, formatWait, say } from '/assets/api.js';
import { request } from '/assets/notes/session.js';

// Where a sign-up's confirmation link lands, in one of two forms:
// - ?token_hash=…&type=signup: notes' own link. Opening it uses nothing (mail scanners open links
//   before people do); the token is used by POST /auth/verify only when the person confirms.
// - #access_token=…&type=signup, or #error=…: the provider's own link already used the token.
// Either way the session the confirmation starts is ended at once: the person signs in as usual.

const $ = (id) => document.getElementById(id);
const query = new URLSearchParams(location.search);
const fragment = new URLSearchParams(location.hash.slice(1));
history.replaceState(null, '', location.pathname);
const tokenHash = query.get('token_hash');
$('loading').hidden = true;

const USED =
  'This confirmation link has expired or was already used. Try signing in: if the address still needs confirming, create the account again with the same address to get a new link.';

function problem(text) {
  $('problem-text').textContent = text;
  $('confirm-form').hidden = true;
  $('link-problem').hidden = false;
}

async function confirmed(accessToken) {
  // The confirmation's session is not kept: ending it leaves nothing usable behind (a failure changes nothing for the person).
  await request('/auth/logout', { method: 'POST', token: accessToken }).catch(() => {});
  $('confirm-form').hidden = true;
  $('done').hidden = false;
  $('done-title').focus();
}

if (fragment.has('error') || fragment.has('error_code')) {
  problem(USED);
} else if (tokenHash && query.get('type') === 'signup') {
  $('confirm-form').hidden = false;
  $('confirm-form').querySelector('button').focus();
} else if (fragment.get('access_token') && fragment.get('type') === 'signup') {
  confirmed(fragment.get('access_token'));
} else {
  problem('This page opens from the link in the email that confirms a new account.');
}

$('confirm-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const errorBox = $('confirm-error');
  const button = event.currentTarget.querySelector('button');
  say(errorBox, '');
  button.disabled = true;
  let session;
  try {
    ({ data: session } = await request('/auth/verify', { method: 'POST', body: { token_hash: tokenHash, type: 'signup' } }));
  } catch (err) {
    button.disabled = false;
    if (err instanceof ApiError && (err.status === 401 || err.status === 400)) return problem(USED);
    if (err instanceof ApiError && err.status === 0) return say(errorBox, err.message);
    if (err instanceof ApiError && err.status === 429) {
      return say(errorBox, `Too many attempts from here. Try again in ${formatWait(err.retryAfter ?? 60)}.`);
    }
    return say(errorBox, 'The address could not be confirmed just now. Try again in a few minutes.');
  }
  await confirmed(session.access_token);
});
