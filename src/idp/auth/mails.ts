import type { PoolClient } from '../../kit/db.js';
import { escapeHtml } from '../../kit/text.js';

// The idp's mails, worded after GoTrue's default templates, each with the link and the code it
// carries. A mail is queued inside the transaction that creates its token, so a token that is
// rolled back never goes out, and an SMTP outage delays mail without failing the request.

export interface Mail {
  to: string;
  subject: string;
  text: string;
  html?: string;
}

/** Where the idp's mails go; absent when no SMTP server is configured. */
export interface MailQueue {
  /** Queues a mail on the caller's transaction. */
  enqueue(client: PoolClient, mail: Mail): Promise<void>;
  /** Called after the transaction that queued mail committed: send now rather than at the next poll. */
  committed(): void;
}

export const MAIL_KINDS = ['signup', 'invite', 'recovery', 'magiclink', 'email_change'] as const;
export type MailKind = (typeof MAIL_KINDS)[number];

/** What a mail is made of: the token's two forms, the idp's own link for it and where that leads. */
export interface MailToken {
  /** The six-digit code (`{{ .Token }}`). */
  code: string;
  /** The token hash (`{{ .TokenHash }}`), which POST /verify takes as `token_hash`. */
  hash: string;
  /** The idp's GET /verify link (`{{ .ConfirmationURL }}`). */
  verifyLink: string;
  /** The allowed redirect the request named, else the app's URL (`{{ .RedirectTo }}`). */
  redirectTo: string;
}

export interface MailSettings {
  /** The app's URL (GoTrue's SITE_URL, `{{ .SiteURL }}`). */
  siteUrl: string;
  /** The product the mails speak for ("Reset your Notes password"); empty: GoTrue's neutral wording. */
  siteName: string;
  /** Whether a mail offers the six-digit code besides its link. */
  offerCode: boolean;
  /** Per kind, the link template; a kind without one links to GET /verify. */
  links: Partial<Record<MailKind, string>>;
}

/**
 * The placeholders of a link template, with GoTrue's template names. URLs go in as they are (a
 * template puts them where a URL starts, as Supabase's `{{ .SiteURL }}/auth/confirm?…`); the
 * address is URL-encoded, since it only makes sense as a query value.
 */
const PLACEHOLDERS: Record<string, (token: MailToken, to: string, settings: MailSettings) => string> = {
  SiteURL: (_t, _to, s) => s.siteUrl,
  ConfirmationURL: (t) => t.verifyLink,
  RedirectTo: (t) => t.redirectTo,
  TokenHash: (t) => t.hash,
  Token: (t) => t.code,
  Email: (_t, to) => encodeURIComponent(to),
};
const PLACEHOLDER = /\{\{\s*\.(\w+)\s*\}\}/g;

/**
 * Why a link template cannot work, or undefined: an unknown placeholder, no token in it, or not an
 * absolute http(s) URL once filled in. Checked at start so a typo stops the idp rather than a mail.
 */
export function linkTemplateProblem(template: string): string | undefined {
  const names = [...template.matchAll(PLACEHOLDER)].map((m) => m[1]!);
  const unknown = names.find((name) => !(name in PLACEHOLDERS));
  if (unknown) return `has an unknown placeholder {{ .${unknown} }} (known: ${Object.keys(PLACEHOLDERS).join(', ')})`;
  if (!names.some((name) => name === 'TokenHash' || name === 'Token' || name === 'ConfirmationURL')) {
    return 'must carry the token: {{ .TokenHash }}, {{ .Token }} or {{ .ConfirmationURL }}';
  }
  const sample = fillLink(
    template,
    { code: '000000', hash: 'f'.repeat(56), verifyLink: 'http://idp.test/auth/v1/verify', redirectTo: 'http://app.test/' },
    'a@b.test',
    { siteUrl: 'http://app.test', siteName: '', offerCode: true, links: {} },
  );
  if (!/^https?:\/\/[^/\s]/.test(sample))
    return 'must start with an http(s) URL, e.g. {{ .SiteURL }}/confirm?token_hash={{ .TokenHash }}&type=signup';
  return undefined;
}

function fillLink(template: string, token: MailToken, to: string, settings: MailSettings): string {
  return template.replace(PLACEHOLDER, (_all, name: string) => PLACEHOLDERS[name]!(token, to, settings));
}

interface Wording {
  subject: string;
  heading: string;
  action: string;
}

// GoTrue's default wording, when no site name is set.
const GOTRUE_WORDING: Record<MailKind, Wording> = {
  signup: { subject: 'Confirm Your Signup', heading: 'Confirm your signup', action: 'Follow this link to confirm your user:' },
  invite: {
    subject: 'You have been invited',
    heading: 'You have been invited',
    action: 'You have been invited to create a user. Follow this link to accept the invite:',
  },
  recovery: { subject: 'Reset Your Password', heading: 'Reset Password', action: 'Follow this link to reset the password for your user:' },
  magiclink: { subject: 'Your Magic Link', heading: 'Magic Link', action: 'Follow this link to login:' },
  email_change: {
    subject: 'Confirm Email Change',
    heading: 'Confirm Change of Email',
    action: 'Follow this link to confirm the update of your email address:',
  },
};

/** The wording of a product's own mails: its name in the subject, plain words for its users. */
function namedWording(kind: MailKind, site: string): Wording {
  switch (kind) {
    case 'signup':
      return {
        subject: `Confirm your ${site} account`,
        heading: `Confirm your ${site} account`,
        action: `Open this link to confirm this address for your ${site} account:`,
      };
    case 'invite':
      return {
        subject: `You have been invited to ${site}`,
        heading: `You have been invited to ${site}`,
        action: `Open this link to accept the invitation to ${site}:`,
      };
    case 'recovery':
      return {
        subject: `Reset your ${site} password`,
        heading: `Reset your ${site} password`,
        action: `Someone asked to reset the password of your ${site} account. If it was you, open this link to choose a new one:`,
      };
    case 'magiclink':
      return { subject: `Sign in to ${site}`, heading: `Sign in to ${site}`, action: `Open this link to sign in to ${site}:` };
    case 'email_change':
      return {
        subject: `Confirm your new ${site} email address`,
        heading: `Confirm your new ${site} email address`,
        action: `Open this link to confirm the change of your ${site} account's email address:`,
      };
  }
}

/**
 * The mail for one token. Its link is the kind's template filled in, else the idp's GET /verify
 * link. The HTML link opens in a new tab (a mail client's or web mailbox's frame may refuse the
 * page), without giving the page a handle on the mail's window.
 */
export function composeMail(kind: MailKind, to: string, token: MailToken, settings: MailSettings): Mail {
  const w = settings.siteName ? namedWording(kind, settings.siteName) : GOTRUE_WORDING[kind];
  const template = settings.links[kind];
  const link = template ? fillLink(template, token, to, settings) : token.verifyLink;
  const code = settings.offerCode ? token.code : undefined;
  const ignore = settings.siteName ? 'If you did not ask for this, ignore this mail: nothing changes.' : undefined;
  const lines = [w.heading, '', w.action, link];
  if (code) lines.push('', `Alternatively, enter the code: ${code}`);
  if (ignore) lines.push('', ignore);
  return {
    to,
    subject: w.subject,
    text: `${lines.join('\n')}\n`,
    html:
      `<h2>${escapeHtml(w.heading)}</h2>\n<p>${escapeHtml(w.action)}</p>\n` +
      `<p><a href="${escapeHtml(link)}" target="_blank" rel="noopener">${escapeHtml(w.heading)}</a></p>\n` +
      (code ? `<p>Alternatively, enter the code: ${escapeHtml(code)}</p>\n` : '') +
      (ignore ? `<p>${escapeHtml(ignore)}</p>\n` : ''),
  };
}

/**
 * The reauthentication mail (GET /reauthenticate): the six-digit nonce only, with GoTrue's default
 * wording; there is no link, since the nonce goes into the app's own password form.
 */
export function reauthenticationMail(to: string, code: string, settings: MailSettings): Mail {
  const heading = settings.siteName ? `Confirm it is you on ${settings.siteName}` : 'Confirm reauthentication';
  const action = 'Enter the code:';
  const ignore = 'If you did not ask for this, do not share the code with anyone.';
  return {
    to,
    subject: heading,
    text: `${heading}\n\n${action} ${code}\n\n${ignore}\n`,
    html: `<h2>${escapeHtml(heading)}</h2>\n<p>${escapeHtml(action)} ${escapeHtml(code)}</p>\n<p>${escapeHtml(ignore)}</p>\n`,
  };
}
