// Shared pieces of the notes tests (not a test file itself): a notes app on real
// HTTP pointed at an idp, users made through the notes API, and token forging.
import { once } from 'node:events';
import type net from 'node:net';
import { after, before } from 'node:test';
import { type NotesDeps, notes } from '../../src/notes/app.js';
import type { NotesConfig } from '../../src/notes/config.js';
import { uniqueEmail } from './emails.js';
import { decodeJwt } from 'jose';
import { request } from './http.js';
import { testLogLevel } from './logs.js';
import { type RunningIdp, startIdp } from './idp.js';
import { type TestService, type TestServiceOptions, started, startTestService } from './services.js';
import { type IdpEndpoint, serviceClient } from './supabase.js';

export type NotesOptions = TestServiceOptions<NotesDeps> & {
  /** The provider it talks to (a test idp, or a stand-in with the same keys). */
  idp: IdpEndpoint;
};
export type RunningNotes = TestService<NotesConfig>;

/**
 * The notes service for a test, configured from env strings as the process is. When it listens, its
 * port is known before it starts, so NOTES_PUBLIC_URL defaults to where it really listens (the
 * recovery mail's link leads to its /reset-password).
 */
export function startNotes({ idp, ...options }: NotesOptions): Promise<RunningNotes> {
  return startTestService(
    notes,
    { IDP_URL: idp.url, IDP_SECRET_KEY: idp.secretKey, IDP_PUBLISHABLE_KEY: idp.publishableKey, LOG_LEVEL: testLogLevel('warn') },
    { listen: true, ...options },
  );
}

/**
 * A test idp and the notes service on it, shared by the tests of a file (or of the describe it is
 * called in): started before those tests, then `setUp` (the scene they share; not a before hook of
 * the file, which node would run beside this one), closed after them.
 */
export interface SharedNotes {
  readonly idp: RunningIdp;
  readonly notes: RunningNotes;
}

export function sharedNotes(options: Omit<NotesOptions, 'idp'> = {}, setUp?: (shared: SharedNotes) => Promise<void>): SharedNotes {
  let idp: RunningIdp | undefined;
  let running: RunningNotes | undefined;
  before(async () => {
    idp = await startIdp();
    running = await startNotes({ idp, ...options });
    await setUp?.(shared);
  });
  after(async () => {
    await running?.close();
    await idp?.close();
  });
  const shared: SharedNotes = {
    get idp() {
      return started(idp);
    },
    get notes() {
      return started(running);
    },
  };
  return shared;
}

export const PASSWORD = 'correct-horse-battery-staple';

export interface TestUser {
  id: string;
  email: string;
  token: string;
  refreshToken: string;
}

/** Registers and logs in through the notes service itself. */
export async function signUp(notesUrl: string, tag?: string): Promise<TestUser> {
  const email = uniqueEmail(tag);
  const registered = await request(notesUrl, 'POST', '/auth/register', { body: { email, password: PASSWORD } });
  if (registered.status !== 201) throw new Error(`register: ${registered.status} ${JSON.stringify(registered.body)}`);
  const login = await request(notesUrl, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
  if (login.status !== 200) throw new Error(`login: ${login.status} ${JSON.stringify(login.body)}`);
  return { id: registered.body.id, email, token: login.body.access_token, refreshToken: login.body.refresh_token };
}

/** A note as the store holds it, read past RLS; undefined when there is none. */
export async function storedNote(idp: IdpEndpoint, id: number): Promise<Record<string, unknown> | undefined> {
  const { data, error } = await serviceClient(idp).from('notes').select('*').eq('id', id);
  if (error) throw new Error(`service read failed: ${error.message}`);
  return (data as Array<Record<string, unknown>>)[0];
}

const b64url = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** The same token with a different payload and the original signature. */
export function tamperedToken(token: string, change: Record<string, unknown>): string {
  const [h, , s] = token.split('.');
  return `${h}.${b64url({ ...decodeJwt(token), ...change })}.${s}`;
}

/** An unsigned token (`alg: none`) with the given claims. */
export function unsignedToken(payload: Record<string, unknown>): string {
  return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(payload)}.`;
}

export type StubAnswer = { status: number; body?: unknown; headers?: Record<string, string> } | 'forward' | 'hang';

/**
 * An HTTP server standing in front of a real idp: each request is forwarded,
 * answered with a fixed status (a failing upstream), or left hanging, as
 * `decide` says. Counts what it saw.
 */
export async function startUpstream(
  target: string | undefined,
  decide: (method: string, path: string) => StubAnswer,
): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const { createServer } = await import('node:http');
  const seen: string[] = [];
  const server = createServer(async (req, res) => {
    const path = req.url ?? '/';
    seen.push(`${req.method} ${path.split('?')[0]}`);
    const answer = decide(req.method ?? 'GET', path);
    if (answer === 'hang') return;
    if (answer !== 'forward') {
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers))
      if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers.set(k, v);
    const upstream = await fetch(`${target}${path}`, {
      method: req.method,
      headers,
      body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
    });
    const out: Record<string, string> = {};
    upstream.headers.forEach((v, k) => {
      if (k !== 'content-length' && k !== 'content-encoding' && k !== 'transfer-encoding' && k !== 'connection') out[k] = v;
    });
    res.writeHead(upstream.status, out);
    res.end(Buffer.from(await upstream.arrayBuffer()));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** A fetch that records `METHOD /path` of every request the notes service makes to the idp. */
export function recordingFetch(): { fetch: typeof fetch; seen: string[] } {
  const seen: string[] = [];
  return {
    seen,
    fetch: (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
      seen.push(`${method} ${new URL(url).pathname}`);
      return fetch(input, init);
    },
  };
}
