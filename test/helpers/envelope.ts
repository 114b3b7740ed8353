import assert from 'node:assert/strict';

/**
 * The `{status, response, message}` error envelope of accounts and the shortener, checked strictly:
 * exactly these three keys, `status` equal to the HTTP status, a non-empty message. The one check
 * behind both services' helpers; returns the message.
 */
export function assertStatusEnvelope(body: unknown, status: number, expect: { response?: string; message?: string | RegExp } = {}): string {
  const b = body as Record<string, unknown>;
  assert.deepEqual(Object.keys(b ?? {}).sort(), ['message', 'response', 'status'], `not an envelope: ${JSON.stringify(b)}`);
  assert.equal(b.status, status);
  assert.equal(typeof b.response, 'string');
  if (expect.response !== undefined) assert.equal(b.response, expect.response);
  assert.equal(typeof b.message, 'string');
  assert.ok((b.message as string).length > 0, 'empty message');
  if (typeof expect.message === 'string') assert.equal(b.message, expect.message);
  else if (expect.message) assert.match(b.message as string, expect.message);
  return b.message as string;
}
