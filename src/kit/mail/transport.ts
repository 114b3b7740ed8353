import nodemailer from 'nodemailer';
import { connectionUrl, str } from '../config.js';

/** The variables of a service that sends mail. */
export const mailVars = (defaultFrom: string) => ({
  /** smtp://user:pass@host:587 or smtps://…:465; unset, the service's mail endpoints answer 503. */
  SMTP_URL: connectionUrl(['smtp:', 'smtps:']),
  /** The From header of every mail the service sends. */
  MAIL_FROM: str({ default: defaultFrom }),
});

/** What the worker needs of a transport; nodemailer's transporter is one. */
export interface MailTransport {
  sendMail(message: { from: string; to: string; subject: string; text: string; html?: string }): Promise<unknown>;
  close(): void;
}

/** Bounds of one SMTP exchange; a server that stops answering frees the worker after these. */
export const SMTP_TIMEOUTS = {
  /** TCP (and TLS) connection established. */
  connectionTimeout: 10_000,
  /** The server's greeting after connecting. */
  greetingTimeout: 10_000,
  /** Silence on an open connection. */
  socketTimeout: 30_000,
  /** Resolving the server's name. */
  dnsTimeout: 10_000,
};

/**
 * A nodemailer transport to SMTP_URL with every timeout set. One connection per
 * mail (no pool): the worker sends one mail at a time, and a connection the
 * server dropped while idle is never reused.
 */
export function createMailTransport(smtpUrl: string, timeouts: Partial<typeof SMTP_TIMEOUTS> = {}): MailTransport {
  const url = new URL(smtpUrl);
  return nodemailer.createTransport({
    host: url.hostname,
    port: url.port ? Number(url.port) : url.protocol === 'smtps:' ? 465 : 587,
    secure: url.protocol === 'smtps:',
    // Credentials go only over TLS: on smtp:// a server (or an attacker in the
    // path) that does not offer STARTTLS fails the send rather than receiving
    // the password in clear. Without credentials (a local relay, the development
    // mailbox) plain SMTP stays allowed.
    requireTLS: url.protocol === 'smtp:' && url.username !== '',
    auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
    ...SMTP_TIMEOUTS,
    ...timeouts,
  });
}
