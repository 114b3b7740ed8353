import { type Target, jsonOf, send } from './http.js';

// The few calls the tests make to set a scene, each failing loudly when the
// service does not answer as it should (the properties under test are asserted
// in the tests themselves).

function expectStatus(what: string, outcome: Awaited<ReturnType<typeof send>>, status: number): Record<string, any> {
  if (!outcome.ok || outcome.status !== status) {
    throw new Error(`${what}: expected ${status}, got ${outcome.ok ? `${outcome.status} ${outcome.text}` : outcome.error}`);
  }
  return jsonOf(outcome) as Record<string, any>;
}

/** POST /api/links from `ip` (through a trusted proxy); returns the code. */
export async function createLink(target: Target, ip: string, url = 'https://example.com/resilience'): Promise<string> {
  const body = expectStatus(
    'create link',
    await send(target, { method: 'POST', path: '/api/links', json: { url }, headers: { 'x-forwarded-for': ip } }),
    201,
  );
  return body.data.code as string;
}

export async function registerAccount(target: Target, email: string, password = 'resilience-pw-1'): Promise<string> {
  const body = expectStatus(
    'register',
    await send(target, { method: 'POST', path: '/auth/register', json: { name: 'Resilience', email, password } }),
    201,
  );
  return body.data.id as string;
}

export async function accountToken(target: Target, email: string, password = 'resilience-pw-1'): Promise<string> {
  const body = expectStatus('login', await send(target, { method: 'POST', path: '/auth/login', json: { email, password } }), 200);
  return body.data.token as string;
}

export const NOTES_PASSWORD = 'resilience-notes-pw-1';

/** Registers through the notes service and logs in; returns the user id and access token. */
export async function notesUser(target: Target, email: string): Promise<{ id: string; token: string }> {
  const registered = expectStatus(
    'notes register',
    await send(target, { method: 'POST', path: '/auth/register', json: { email, password: NOTES_PASSWORD } }),
    201,
  );
  const session = expectStatus(
    'notes login',
    await send(target, { method: 'POST', path: '/auth/login', json: { email, password: NOTES_PASSWORD } }),
    200,
  );
  return { id: registered.id as string, token: session.access_token as string };
}

export async function createNote(target: Target, token: string, title: string): Promise<number> {
  const body = expectStatus(
    'create note',
    await send(target, { method: 'POST', path: '/notes', json: { title }, headers: { authorization: `Bearer ${token}` } }),
    201,
  );
  return body.id as number;
}
