// A real SMTP server for tests (smtp-server), keeping every message it accepted, parsed
// (mailparser). It can be stopped and started again on the same port (an outage) or made to
// answer RCPT TO with an error reply (a refusing server).
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { freePort } from './ports.js';

export interface ReceivedMail {
  to: string;
  from: string;
  subject: string;
  text: string;
  html: string | undefined;
  parsed: ParsedMail;
}

export interface TestSmtp {
  /** smtp://127.0.0.1:<port>, for SMTP_URL. */
  readonly url: string;
  readonly port: number;
  /** Every mail accepted so far, oldest first. */
  readonly received: ReceivedMail[];
  /**
   * The next mail to `to` not handed out by an earlier call; rejects after `timeout` ms
   * (default 20 s: a wait, not a measure, so it only bounds a starved machine) naming the address.
   */
  waitForMail(to: string, opts?: { timeout?: number }): Promise<ReceivedMail>;
  /** Answers RCPT TO with this reply code (421: try later, 550: no such mailbox) until called with undefined. */
  refuseWith(code: number | undefined): void;
  /** Closes the port (connections are refused) until start(). */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startSmtp(): Promise<TestSmtp> {
  const port = await freePort();
  const received: ReceivedMail[] = [];
  const handedOut = new Set<ReceivedMail>();
  const waiters = new Set<() => void>();
  let refusal: number | undefined;
  let server: SMTPServer | undefined;

  const make = () =>
    new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onRcptTo(_address, _session, callback) {
        if (refusal === undefined) return callback();
        const err = Object.assign(new Error(refusal >= 500 ? 'mailbox unavailable' : 'try again later'), { responseCode: refusal });
        callback(err);
      },
      onData(stream, session, callback) {
        simpleParser(stream)
          .then((parsed) => {
            for (const rcpt of session.envelope.rcptTo) {
              received.push({
                to: rcpt.address,
                from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
                subject: parsed.subject ?? '',
                text: parsed.text ?? '',
                html: typeof parsed.html === 'string' ? parsed.html : undefined,
                parsed,
              });
            }
            for (const wake of waiters) wake();
            callback();
          })
          .catch((err: Error) => callback(err));
      },
    });

  const start = async () => {
    server = make();
    await new Promise<void>((resolve, reject) => {
      server!.once('error', reject);
      server!.listen(port, '127.0.0.1', () => resolve());
    });
    server.on('error', () => {});
  };
  const stop = async () => {
    const current = server;
    server = undefined;
    if (current) await new Promise<void>((resolve) => current.close(() => resolve()));
  };
  await start();

  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    received,
    waitForMail(to, { timeout = 20_000 } = {}) {
      const address = to.toLowerCase();
      const take = () => {
        const mail = received.find((m) => m.to.toLowerCase() === address && !handedOut.has(m));
        if (mail) handedOut.add(mail);
        return mail;
      };
      return new Promise<ReceivedMail>((resolve, reject) => {
        const found = take();
        if (found) return resolve(found);
        const check = () => {
          const mail = take();
          if (!mail) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(mail);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no mail to ${to} within ${timeout} ms`));
        }, timeout);
        waiters.add(check);
      });
    },
    refuseWith(code) {
      refusal = code;
    },
    stop,
    start,
    close: stop,
  };
}

/** The URL in a mail's text that starts with `prefix` (the link a user would follow). */
export function linkIn(mail: ReceivedMail, prefix: string): string {
  const match = mail.text.split(/\s+/).find((word) => word.startsWith(prefix));
  if (!match) throw new Error(`no link starting with ${prefix} in the mail "${mail.subject}"`);
  return match;
}
