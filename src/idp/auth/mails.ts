import type { PoolClient } from '../../kit/db.js';

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

export type MailKind = 'signup' | 'invite' | 'recovery' | 'magiclink' | 'email_change';

const escapeHtml = (value: string) =>
  value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const WORDING: Record<MailKind, { subject: string; heading: string; action: string }> = {
  signup: { subject: 'Confirm Your Signup', heading: 'Confirm your signup', action: 'Follow this link to confirm your user:' },
  invite: { subject: 'You have been invited', heading: 'You have been invited', action: 'You have been invited to create a user. Follow this link to accept the invite:' },
  recovery: { subject: 'Reset Your Password', heading: 'Reset Password', action: 'Follow this link to reset the password for your user:' },
  magiclink: { subject: 'Your Magic Link', heading: 'Magic Link', action: 'Follow this link to login:' },
  email_change: { subject: 'Confirm Email Change', heading: 'Confirm Change of Email', action: 'Follow this link to confirm the update of your email address:' },
};

/** The mail for one token: the link (`action_link`) and the code (`email_otp`) it was made from. */
export function composeMail(kind: MailKind, to: string, link: string, code: string): Mail {
  const w = WORDING[kind];
  return {
    to,
    subject: w.subject,
    text: `${w.heading}\n\n${w.action}\n${link}\n\nAlternatively, enter the code: ${code}\n`,
    html:
      `<h2>${escapeHtml(w.heading)}</h2>\n<p>${escapeHtml(w.action)}</p>\n` +
      `<p><a href="${escapeHtml(link)}">${escapeHtml(w.heading)}</a></p>\n<p>Alternatively, enter the code: ${escapeHtml(code)}</p>\n`,
  };
}
