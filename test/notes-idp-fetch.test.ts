// The deadline on every request notes sends to the identity provider
// (boundedFetch), over real HTTP: it covers the body as well as the headers,
// and it ends as soon as the body has been read, so a finished request leaves
// nothing waiting on a timer.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { boundedFetch, type IdpFetch } from '../src/notes/idp-clients.js';

const TIMEOUT_MS = 200;

let server: Server;
let url: string;
before(async () => {
  server = createServer((req, res) => {
    if (req.url === '/stall-body') {
      // Headers and half a body, then nothing: a provider that hangs mid-answer.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"half":');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** boundedFetch over the real fetch, keeping the signal each request was given. */
function recorded(): { fetch: IdpFetch; signals: AbortSignal[] } {
  const signals: AbortSignal[] = [];
  const base: IdpFetch = (input, init) => {
    signals.push(init!.signal!);
    return fetch(input, init);
  };
  return { fetch: boundedFetch(TIMEOUT_MS, base), signals };
}

test('a body that stalls after the headers is cut off at the deadline', async () => {
  const { fetch: bounded } = recorded();
  const started = Date.now();
  const res = await bounded(`${url}/stall-body`);
  assert.equal(res.status, 200);
  await assert.rejects(res.text(), (err: Error) => err.name === 'TimeoutError' || /abort/i.test(err.message));
  const elapsed = Date.now() - started;
  // The body stalls for ever: an answer at all proves the cut. The upper bound is a busy machine's slack, not a speed.
  assert.ok(elapsed >= TIMEOUT_MS - 20 && elapsed < TIMEOUT_MS + 5000, `cut off after ${elapsed} ms`);
});

test('every body reader ends the deadline once it has read the body', async () => {
  for (const reader of ['json', 'text', 'arrayBuffer', 'blob'] as const) {
    const { fetch: bounded, signals } = recorded();
    const res = await bounded(`${url}/ok`);
    await res[reader]();
    await sleep(TIMEOUT_MS * 2);
    assert.equal(signals[0]!.aborted, false, `${reader}: the deadline still fired after the body was read`);
  }
});

test('a response whose body is never read keeps its deadline', async () => {
  const { fetch: bounded, signals } = recorded();
  const res = await bounded(`${url}/ok`);
  assert.equal(res.status, 200);
  await sleep(TIMEOUT_MS * 2);
  assert.equal(signals[0]!.aborted, true);
  assert.equal((signals[0]!.reason as Error).name, 'TimeoutError');
});

test("the caller's own signal still aborts the request", async () => {
  const { fetch: bounded } = recorded();
  const mine = new AbortController();
  const pending = bounded(`${url}/stall-body`, { signal: mine.signal }).then((res) => res.text());
  mine.abort(new Error('caller gave up'));
  await assert.rejects(pending, /caller gave up/);
});
