import assert from 'node:assert/strict';
import fc from 'fast-check';
import { runSeed } from '../fuzz/prng.js';

// What the property-based files of the resilience suite share: one seed per run (printed with
// each test's figures; FUZZ_SEED=<seed> replays it), fast-check's parameters, and the inputs and
// checks every service's rules are tried with.

export const seed = runSeed();
export const params = (numRuns: number) => ({ seed, numRuns, endOnFailure: true, includeErrorInReport: true });

export function envelopeOf(body: string, status: number): { status: number; response: string; message: string } {
  const parsed = JSON.parse(body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(parsed).sort(), ['message', 'response', 'status'], body);
  assert.equal(parsed.status, status, body);
  return parsed as { status: number; response: string; message: string };
}

export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
export const byteLength = (s: string) => Buffer.byteLength(s, 'utf8');

/** Characters from every UTF-8 width, combining marks, ZWJ sequences, whitespace and controls. */
export const unicodeUnit = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('a', 'Z', '7', '-', '_', '.', "'", ' ') },
  { weight: 3, arbitrary: fc.constantFrom('é', 'ß', 'ø', 'Ж', 'ש', 'ع') },
  { weight: 3, arbitrary: fc.constantFrom('€', '中', '日', 'ह', '\u0301', '\u200d', '\u3000', '\ufeff') },
  { weight: 3, arbitrary: fc.constantFrom('😀', '👩\u200d👩\u200d👧', '🏳️\u200d🌈', '𝔘', '🇫🇷') },
  { weight: 1, arbitrary: fc.constantFrom('\t', '\n', '\u0000', '\u007f', '\u0085', '\u00a0', '\ud800', '\udfff') },
);
export const unicodeText = (maxLength: number) => fc.string({ unit: unicodeUnit, maxLength });
