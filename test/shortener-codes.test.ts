import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CODE_LENGTH, CODE_PATTERN, randomCode } from '../src/shortener/codes.js';
import { isWellFormedCode } from '../src/shortener/links.js';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

describe('randomCode', () => {
  it('yields 7 symbols of [0-9a-zA-Z] and every symbol appears', () => {
    assert.equal(CODE_LENGTH, 7);
    const seen = new Set<string>();
    for (let i = 0; i < 5000; i++) {
      const code = randomCode();
      assert.equal(code.length, 7);
      assert.match(code, /^[0-9a-zA-Z]{7}$/);
      for (const ch of code) seen.add(ch);
    }
    assert.equal(seen.size, 62);
  });

  it('is not sequential: consecutive codes differ almost everywhere, and repeats are as rare as chance', () => {
    const codes = Array.from({ length: 20_000 }, () => randomCode());
    // 62^7 codes: a repeat among 20,000 has probability ~6e-5, two ~2e-9.
    assert.ok(codes.length - new Set(codes).size <= 1);
    // A counter changes one or two trailing symbols per step; random codes differ in 7 × 61/62 ≈ 6.9 places.
    let differing = 0;
    for (let i = 1; i < codes.length; i++) {
      for (let p = 0; p < 7; p++) if (codes[i]![p] !== codes[i - 1]![p]) differing += 1;
    }
    const mean = differing / (codes.length - 1);
    assert.ok(mean > 6.7 && mean < 7, `mean differing positions ${mean}`);
  });

  it('has no modulo bias: chi-square over 62 symbols stays far below what a biased mapping gives', () => {
    // ~200k symbols. Plain `byte % 62` would make the first 8 symbols 5/4 as likely:
    // a chi-square above 1,000. Uniform gives ~61 (61 degrees of freedom, sd ~11);
    // 150 is beyond p = 1e-12, so the test does not flake.
    const counts = new Map<string, number>();
    let symbols = 0;
    while (symbols < 200_000) {
      for (const ch of randomCode()) {
        counts.set(ch, (counts.get(ch) ?? 0) + 1);
        symbols += 1;
      }
    }
    const expected = symbols / 62;
    let chiSquare = 0;
    for (const ch of ALPHABET) {
      const observed = counts.get(ch) ?? 0;
      chiSquare += (observed - expected) ** 2 / expected;
    }
    assert.ok(chiSquare < 150, `chi-square ${chiSquare.toFixed(1)} over 62 buckets`);

    // Each position on its own is uniform too (a bias per position would hide in the total).
    for (let position = 0; position < 7; position++) {
      const perPosition = new Map<string, number>();
      const n = 62 * 400;
      for (let i = 0; i < n; i++) {
        const ch = randomCode()[position]!;
        perPosition.set(ch, (perPosition.get(ch) ?? 0) + 1);
      }
      let chi = 0;
      for (const ch of ALPHABET) chi += ((perPosition.get(ch) ?? 0) - 400) ** 2 / 400;
      assert.ok(chi < 150, `position ${position}: chi-square ${chi.toFixed(1)}`);
    }
  });

  it('the statistical check does detect a modulo-biased mapping', () => {
    // Guards the guard: the same statistic on `byte % 62` exceeds the threshold.
    const counts = new Array<number>(62).fill(0);
    const n = 200_000;
    for (let i = 0; i < n; i++) counts[(i % 256) % 62]! += 1;
    const expected = n / 62;
    const chiSquare = counts.reduce((sum, observed) => sum + (observed - expected) ** 2 / expected, 0);
    assert.ok(chiSquare > 150, `biased chi-square ${chiSquare.toFixed(1)}`);
  });
});

describe('code pattern (rule 4)', () => {
  it('generated codes are exactly 7 ASCII letters and digits', () => {
    for (const good of ['abcdefg', 'ABCDEFG', '0123456', 'aZ09bY8']) assert.match(good, CODE_PATTERN);
    for (const bad of ['abcdef', 'abcdefgh', 'abc-def', 'abc_def']) assert.doesNotMatch(bad, CODE_PATTERN);
  });

  it('a well-formed code is a generated one or a chosen one: 3 to 64 of A-Z a-z 0-9 _ -', () => {
    for (const good of ['abcdefg', 'ABCDEFG', '0123456', 'aZ09bY8', 'abc', 'abcdef', 'abcdefgh', 'abc-def', 'abc_def', 'x'.repeat(64)]) {
      assert.ok(isWellFormedCode(good), good);
    }
    for (const bad of ['', 'ab', 'x'.repeat(65), 'abc.def', '../etc', 'abcdéfg', 'abcdef\n', ' abcdef', 'abc\u0000def', 'ａｂｃｄｅｆｇ']) {
      assert.ok(!isWellFormedCode(bad), JSON.stringify(bad));
      assert.doesNotMatch(bad, CODE_PATTERN);
    }
  });
});
