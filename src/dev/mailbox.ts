import { chmod, mkdir, readdir } from 'node:fs/promises';
import http, { type IncomingMessage } from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { freeLoopbackPort } from './embedded-postgres.js';

// The development mailbox of `npm start`: maildev, an SMTP server that keeps
// what it receives (the last 500 mails, under DATA_DIR/maildev) and shows it on
// a web page. Every mail's links are there, reset links included, so:
// - its page and API are reached only through a proxy on MAILDEV_WEB_PORT that
//   refuses a request another web page sends (an Origin other than the
//   mailbox's own) or that names another host (against DNS rebinding), and takes
//   out the CORS headers with which maildev would let any origin read it;
// - its files are private: the folder 0700, every file 0600 (the launcher's
//   umask, set before it starts, covers the mails written later).
// Both listen on 127.0.0.1 only, whatever HOST says.

export const MAILBOX_HOST = '127.0.0.1';

export interface DevMailbox {
  smtpUrl: string;
  webUrl: string;
  stop(): Promise<void>;
}

/** Brings a folder and everything in it to owner-only modes (a mailbox written by an earlier run may be open to others). */
async function makePrivate(directory: string): Promise<void> {
  await mkdir(directory, { recursive: true, mode: 0o700 });
  await chmod(directory, 0o700);
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) await makePrivate(full);
    else await chmod(full, 0o600);
  }
}

/** What the proxy lets through: the mailbox's own page, by its own name. */
function fromTheMailbox(request: IncomingMessage, port: number): boolean {
  const own = [`${MAILBOX_HOST}:${port}`, `localhost:${port}`];
  if (!own.includes(request.headers.host ?? '')) return false;
  const origin = request.headers.origin;
  return origin === undefined || own.some((host) => origin === `http://${host}`);
}

const REFUSED = 'This mailbox answers its own page only, at its own address.\n';

function startProxy(port: number, upstreamPort: number): Promise<{ close(): Promise<void> }> {
  const upgraded = new Set<net.Socket>();
  const server = http.createServer((request, response) => {
    if (!fromTheMailbox(request, port)) {
      response.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' }).end(REFUSED);
      return;
    }
    const upstream = http.request(
      { host: MAILBOX_HOST, port: upstreamPort, method: request.method, path: request.url, headers: request.headers },
      (answer) => {
        const headers = Object.fromEntries(Object.entries(answer.headers).filter(([name]) => !name.startsWith('access-control-')));
        response.writeHead(answer.statusCode ?? 502, headers);
        answer.pipe(response);
      },
    );
    upstream.on('error', () => {
      if (!response.headersSent) response.writeHead(502);
      response.end();
    });
    request.pipe(upstream);
  });
  // The page's live updates (socket.io over WebSocket): the same check, then the bytes as they are.
  server.on('upgrade', (request: IncomingMessage, socket: net.Socket, head: Buffer) => {
    if (!fromTheMailbox(request, port)) {
      socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\n${REFUSED}`);
      return;
    }
    const upstream = net.connect(upstreamPort, MAILBOX_HOST, () => {
      const headers = [];
      for (let i = 0; i < request.rawHeaders.length; i += 2) headers.push(`${request.rawHeaders[i]}: ${request.rawHeaders[i + 1]}`);
      upstream.write(`${request.method} ${request.url} HTTP/${request.httpVersion}\r\n${headers.join('\r\n')}\r\n\r\n`);
      upstream.write(head);
      socket.pipe(upstream).pipe(socket);
    });
    upgraded.add(socket);
    socket.once('close', () => upgraded.delete(socket));
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  const close = async () => {
    for (const socket of upgraded) socket.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, MAILBOX_HOST, () => resolve({ close }));
  });
}

export async function startDevMailbox(opts: { smtpPort: number; webPort: number; directory: string }): Promise<DevMailbox> {
  await makePrivate(opts.directory);
  const { MailDev } = await import('maildev');
  const internalPort = await freeLoopbackPort();
  const maildev = new MailDev({
    smtp: opts.smtpPort,
    ip: MAILBOX_HOST,
    web: internalPort,
    webIp: MAILBOX_HOST,
    mailDirectory: opts.directory,
    maxEmails: 500,
    silent: true,
  });
  // maildev prints its own web address, which is the proxy's upstream, not where to open it.
  const info = console.info;
  console.info = () => {};
  try {
    await maildev.start();
  } finally {
    console.info = info;
  }
  const proxy = await startProxy(opts.webPort, internalPort).catch(async (err: Error) => {
    await maildev.stop();
    throw err;
  });
  return {
    smtpUrl: `smtp://${MAILBOX_HOST}:${opts.smtpPort}`,
    webUrl: `http://${MAILBOX_HOST}:${opts.webPort}`,
    stop: async () => {
      await proxy.close();
      await maildev.stop();
    },
  };
}
