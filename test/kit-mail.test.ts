import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { SMTPServer } from 'smtp-server';
import { type Pool, createPool, migrate, withTransaction } from '../src/kit/db.js';
import { enqueueMail } from '../src/kit/mail/outbox.js';
import { createMailTransport } from '../src/kit/mail/transport.js';
import { type MailWorker, type MailWorkerOptions, retryDelayMs, startMailWorker } from '../src/kit/mail/worker.js';
import { type TestDatabase, freshDatabase } from './helpers/database.js';
import { uniqueEmail } from './helpers/emails.js';
import { LogCapture } from './helpers/logs.js';
import { type TestSmtp, startSmtp } from './helpers/smtp.js';

const OUTBOX_DDL = new URL('../src/kit/mail/migrations/001_outbox.sql', import.meta.url);

let db: TestDatabase;
let pool: Pool;
let smtp: TestSmtp;
const workers: MailWorker[] = [];

before(async () => {
  db = await freshDatabase('kitmail', [{ name: '001_mail_outbox.sql', sql: await readFile(OUTBOX_DDL, 'utf8') }]);
  pool = createPool(db.url, { max: 6 });
  smtp = await startSmtp();
});

// Each test's workers stop with it, so none of them sends another test's mail.
afterEach(async () => {
  for (const worker of workers.splice(0)) await worker.stop();
  smtp.refuseWith(undefined);
});

after(async () => {
  await smtp.close();
  await pool.end();
  await db.drop();
});

/** A worker on the test SMTP server with short delays; stopped after the file. */
function worker(overrides: Partial<MailWorkerOptions> = {}, logs = new LogCapture()): MailWorker {
  const w = startMailWorker({
    pool,
    transport: createMailTransport(smtp.url),
    from: 'Tests <no-reply@example.com>',
    log: pino({ level: 'info' }, logs),
    pollIntervalMs: 100,
    retryBaseMs: 100,
    retryMaxMs: 400,
    ...overrides,
  });
  workers.push(w);
  return w;
}

async function outboxRow(to: string): Promise<Record<string, unknown> | undefined> {
  const { rows } = await pool.query('SELECT * FROM mail_outbox WHERE recipient = $1', [to]);
  return rows[0];
}

async function until(condition: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

const mailTo = (to: string, secret = 'https://example.com/reset#token=secret-link-value') => ({
  to,
  subject: `Hello ${to}`,
  text: `Follow ${secret}`,
  html: `<p><a href="${secret}">link</a></p>`,
});

describe('mail outbox and worker', () => {
  it("upgrades a database whose outbox came from a service's own migration of an earlier release, keeping its queued mail", async () => {
    const earlier = await freshDatabase('kitmailupgrade', [
      { name: '003_mail_outbox.sql', sql: await readFile(new URL('./fixtures/previous-release-mail-outbox.sql', import.meta.url), 'utf8') },
    ]);
    const upgraded = createPool(earlier.url, { max: 1 });
    try {
      const to = uniqueEmail('upgrade');
      await enqueueMail(upgraded, mailTo(to));
      const applied = await migrate(upgraded, 'mail', [{ name: '001_outbox.sql', sql: await readFile(OUTBOX_DDL, 'utf8') }]);
      assert.deepEqual(applied, ['001_outbox.sql']);
      const { rows } = await upgraded.query('SELECT recipient FROM mail_outbox');
      assert.deepEqual(rows, [{ recipient: to }]);
    } finally {
      await upgraded.end();
      await earlier.drop();
    }
  });

  it('sends a queued mail with its From, subject, text and HTML, then deletes the row', async () => {
    const to = uniqueEmail('plain');
    await enqueueMail(pool, mailTo(to));
    worker();
    const mail = await smtp.waitForMail(to);
    assert.equal(mail.subject, `Hello ${to}`);
    assert.equal(mail.from, 'no-reply@example.com');
    assert.match(mail.text, /token=secret-link-value/);
    assert.match(mail.html ?? '', /<a href=/);
    await until(async () => (await outboxRow(to)) === undefined);
  });

  it('a mail queued in a transaction that rolls back is never sent', async () => {
    const rolledBack = uniqueEmail('rolledback');
    const committed = uniqueEmail('committed');
    await assert.rejects(
      withTransaction(pool, async (client) => {
        await enqueueMail(client, mailTo(rolledBack));
        throw new Error('the action failed');
      }),
      /the action failed/,
    );
    await withTransaction(pool, (client) => enqueueMail(client, mailTo(committed)));
    const w = worker();
    w.wake();
    await smtp.waitForMail(committed);
    assert.equal(await outboxRow(rolledBack), undefined);
    assert.ok(!smtp.received.some((m) => m.to === rolledBack));
  });

  it('SMTP down: the mail is retried with backoff and delivered when the server is back; the log names no body', async () => {
    const logs = new LogCapture();
    const to = uniqueEmail('outage');
    await smtp.stop();
    try {
      await enqueueMail(pool, mailTo(to));
      worker({}, logs).wake();
      await until(async () => Number((await outboxRow(to))?.attempts ?? 0) >= 3);
    } finally {
      await smtp.start();
    }
    const mail = await smtp.waitForMail(to);
    assert.equal(mail.subject, `Hello ${to}`);
    const retries = logs.lines().filter((l) => l.event === 'mail_retry');
    assert.ok(retries.length >= 2, logs.text());
    assert.equal(retries[0]!.level, 40);
    assert.doesNotMatch(logs.text(), /secret-link-value|Follow|Hello/);
  });

  it('a 4xx refusal is retried until the server accepts', async () => {
    const to = uniqueEmail('later');
    smtp.refuseWith(451);
    await enqueueMail(pool, mailTo(to));
    worker().wake();
    await until(async () => Number((await outboxRow(to))?.attempts ?? 0) >= 2);
    smtp.refuseWith(undefined);
    await smtp.waitForMail(to);
  });

  it('a 5xx refusal gives the mail up at once, logged at error without the address or body, its body erased', async () => {
    const logs = new LogCapture();
    smtp.refuseWith(550);
    const to = uniqueEmail('never');
    await enqueueMail(pool, mailTo(to));
    worker({}, logs).wake();
    await until(async () => (await outboxRow(to))?.failed_at != null);
    const row = (await outboxRow(to))!;
    assert.equal(row.attempts, 1);
    assert.equal(row.text_body, '');
    assert.equal(row.html_body, null);
    assert.equal(row.last_error, 'RCPT TO 550 EENVELOPE');
    const failed = logs.lines().filter((l) => l.event === 'mail_failed');
    assert.equal(failed.length, 1);
    assert.equal(failed[0]!.level, 50);
    assert.doesNotMatch(logs.text(), /secret-link-value|never-/);
  });

  it('attempts are bounded: after maxAttempts failures the mail is marked failed and no longer tried', async () => {
    const to = uniqueEmail('bounded');
    smtp.refuseWith(421);
    try {
      await enqueueMail(pool, mailTo(to));
      worker({ maxAttempts: 3, retryBaseMs: 20, retryMaxMs: 20 }).wake();
      await until(async () => (await outboxRow(to))?.failed_at != null);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await outboxRow(to))!.attempts, 3);
    } finally {
      smtp.refuseWith(undefined);
    }
    assert.ok(!smtp.received.some((m) => m.to === to));
  });

  it('credentials in an smtp:// URL are never sent without TLS: a server offering no STARTTLS fails the send before AUTH', async () => {
    const authAttempts: string[] = [];
    const plain = new SMTPServer({
      disabledCommands: ['STARTTLS'],
      authOptional: true,
      onAuth(auth, _session, callback) {
        authAttempts.push(auth.username ?? '');
        callback(null, { user: auth.username });
      },
    });
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const port = (plain.server.address() as AddressInfo).port;
    try {
      const withPassword = createMailTransport(`smtp://mailer:s3cret@127.0.0.1:${port}`);
      await assert.rejects(withPassword.sendMail({ from: 'a@example.com', to: 'b@example.com', subject: 's', text: 't' }));
      withPassword.close();
      assert.deepEqual(authAttempts, [], 'the password never reached the server');
      // Without credentials plain SMTP is allowed (the development mailbox).
      const anonymous = createMailTransport(`smtp://127.0.0.1:${port}`);
      await anonymous.sendMail({ from: 'a@example.com', to: 'b@example.com', subject: 's', text: 't' });
      anonymous.close();
    } finally {
      await new Promise<void>((resolve) => plain.close(() => resolve()));
    }
  });

  it('the backoff doubles from the base and stops at the cap', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 20].map((n) => retryDelayMs(n, 5000, 30_000)),
      [5000, 10_000, 20_000, 30_000, 30_000, 30_000],
    );
  });

  it('two workers on one outbox never send one mail twice', async () => {
    const tag = uniqueEmail('pair');
    const recipients = Array.from({ length: 40 }, (_, i) => `${i}-${tag}`);
    for (const to of recipients) await enqueueMail(pool, mailTo(to));
    const second = createPool(db.url, { max: 2 });
    try {
      const a = worker();
      const b = worker({ pool: second });
      a.wake();
      b.wake();
      for (const to of recipients) await smtp.waitForMail(to, { timeout: 15_000 });
      await new Promise((r) => setTimeout(r, 500));
      await a.stop();
      await b.stop();
    } finally {
      await second.end();
    }
    for (const to of recipients) assert.equal(smtp.received.filter((m) => m.to === to).length, 1, to);
  });

  it('stop sends what is queued before returning (drain), and the worker stays stopped', async () => {
    const w = worker({ pollIntervalMs: 60_000 });
    // Its first round finds nothing; the next poll is a minute away.
    await new Promise((r) => setTimeout(r, 200));
    const to = uniqueEmail('drain');
    await enqueueMail(pool, mailTo(to));
    await w.stop();
    assert.ok(
      smtp.received.some((m) => m.to === to),
      'sent before stop returned',
    );
    const late = uniqueEmail('afterstop');
    await enqueueMail(pool, mailTo(late));
    w.wake();
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(!smtp.received.some((m) => m.to === late));
    await pool.query('DELETE FROM mail_outbox WHERE recipient = $1', [late]);
  });
});
