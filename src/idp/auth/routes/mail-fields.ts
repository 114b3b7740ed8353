import { Type } from '@sinclair/typebox';
import { described } from '../../../kit/http/openapi.js';

// What the routes that mail a link share. Mails are limited per recipient (SMTP max frequency) and
// per hour for the service; /recover, /resend and /otp count per client address with sign-ups,
// /verify on its own limit.

export const RedirectQuery = Type.Object({
  redirect_to: Type.Optional(
    Type.String({ description: 'Where the link leads after verification; an unlisted URL falls back to IDP_APP_URL' }),
  ),
});

/** supabase-js sends these with null values it does not use (code_challenge without PKCE, the captcha token). */
export const Ignored = Type.Optional(Type.Unknown());

export const PkceFields = {
  code_challenge: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'PKCE (supabase-js flowType pkce)' })),
  code_challenge_method: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 's256 or plain' })),
};

export const Accepted = described(
  Type.Object({}),
  'Accepted: a mail goes out if the address has something to send (the same answer otherwise)',
);
