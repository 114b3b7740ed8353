import type { Pool, PoolClient } from '../db.js';

/**
 * A mail to one recipient. The text part is always sent; the HTML part is optional.
 * The table it goes into (mail_outbox) is created by ./migrations, which the kit
 * applies to every service that sends mail (kit/service.ts, `mail: true`).
 */
export interface OutgoingMail {
  to: string;
  subject: string;
  text: string;
  html?: string;
}

/**
 * Queues a mail. Pass the client of the transaction that creates what the mail
 * announces: the mail is then sent only if that transaction commits. The
 * worker (./worker.ts) sends it; call its wake() after the commit to send it
 * at once rather than at the next poll.
 */
export async function enqueueMail(db: PoolClient | Pool, mail: OutgoingMail): Promise<void> {
  await db.query('INSERT INTO mail_outbox (recipient, subject, text_body, html_body) VALUES ($1, $2, $3, $4)', [
    mail.to,
    mail.subject,
    mail.text,
    mail.html ?? null,
  ]);
}
