// What `npm start` shows of the services' JSON log lines (src/dev/dev-logs.ts):
// readable lines, one per request, health probes left out; with LOG_FORMAT=json
// the lines as they are, probes still left out.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { DevLog, type LogFormat } from '../src/dev/dev-logs.js';

function capture(format: LogFormat): { log: DevLog; text(): string } {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d: Buffer) => (text += d.toString()));
  return { log: new DevLog(format, out, false), text: () => text };
}

const json = (entry: Record<string, unknown>) =>
  JSON.stringify({ level: 30, time: Date.UTC(2026, 0, 1, 12, 0, 0), pid: 1, hostname: 'h', ...entry });
// A request's two lines as the services write them: the incoming one at debug, the access line at info.
const incoming = (reqId: string, method: string, url: string) =>
  json({ level: 20, reqId, req: { method, url, host: 'x' }, msg: 'incoming request' });
const completed = (reqId: string, method: string, url: string, statusCode: number) =>
  json({ reqId, req: { method, url, host: 'x' }, res: { statusCode }, responseTime: 12.4, msg: 'request completed' });

test('pretty: a request is one line once answered, with its method, path, status and time, named after its service', () => {
  const { log, text } = capture('pretty');
  log.line('notes', json({ reqId: 'r1', event: 'note_created', msg: 'note created' }));
  log.line('notes', completed('r1', 'POST', '/notes', 201));
  const lines = text().trimEnd().split('\n');
  assert.equal(lines.length, 2, text());
  assert.match(lines[0]!, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: notes: note created \{.*"event":"note_created"/);
  assert.match(lines[1]!, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: notes: POST \/notes → 201 in 12 ms$/);
  assert.doesNotMatch(text(), /pid|hostname/);
});

test('health probes are left out, their access line and their incoming line at debug, whatever the format', () => {
  for (const format of ['pretty', 'json'] as const) {
    const { log, text } = capture(format);
    log.line('idp', incoming('p1', 'GET', '/healthz'));
    log.line('idp', completed('p1', 'GET', '/healthz', 200));
    log.line('idp', incoming('p2', 'GET', '/readyz?verbose=1'));
    log.line('idp', completed('p2', 'GET', '/readyz?verbose=1', 503));
    assert.equal(text(), '', format);
    log.line('idp', completed('r2', 'GET', '/healthzz', 404));
    assert.match(text(), /healthzz/, format);
  }
});

test('json: every other line is passed on exactly as the service wrote it', () => {
  const { log, text } = capture('json');
  const lines = [incoming('r1', 'GET', '/notes'), completed('r1', 'GET', '/notes', 200), json({ service: 'notes', msg: 'stopped' })];
  for (const line of lines) log.line('notes', line);
  assert.equal(text(), `${lines.join('\n')}\n`);
});

test('a line that is not JSON (a crash’s stack) passes as it is; the launcher’s own pino lines are told like the services’', async () => {
  const { log, text } = capture('pretty');
  log.line('accounts', 'Error: boom');
  log.line('accounts', '    at main (file.ts:1:1)');
  const launcher = pino({ base: { service: 'launcher' } }, log.stream('launcher'));
  launcher.warn('stopping everything');
  assert.match(text(), /^Error: boom\n {4}at main \(file\.ts:1:1\)\n\[[\d:.]+\] WARN: launcher: stopping everything\n$/);
});
