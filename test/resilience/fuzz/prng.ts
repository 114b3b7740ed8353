// A small seeded PRNG for the hostile-input tests, so every failure can be replayed:
// each file prints its seed, and FUZZ_SEED=<seed> runs the same requests again.

/** The run's seed: FUZZ_SEED when set (to reproduce a failure), otherwise a fresh one. */
export function runSeed(): number {
  const given = process.env.FUZZ_SEED;
  if (given !== undefined && given !== '') {
    const seed = Number(given);
    if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer, got "${given}"`);
    return seed >>> 0;
  }
  return (Math.random() * 0x1_0000_0000) >>> 0;
}

export interface Rng {
  readonly seed: number;
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform integer in [min, max] (both included). */
  int(min: number, max: number): number;
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** Picks by weight: [[weight, value], ...]. */
  weighted<T>(items: ReadonlyArray<readonly [number, T]>): T;
  /** `length` characters drawn from `alphabet` (code points). */
  string(length: number, alphabet: string): string;
  bytes(length: number): Buffer;
  /** A child generator with its own stream, so one part of a run does not shift another. */
  fork(label: string): Rng;
}

/** mulberry32: tiny, fast, and good enough to spread test inputs (not for secrets). */
export function createRng(seed: number): Rng {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 0x1_0000_0000;
  };
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1));
  const rng: Rng = {
    seed,
    next,
    int,
    chance: (p) => next() < p,
    pick: <T>(items: readonly T[]): T => {
      if (items.length === 0) throw new Error('pick from an empty list');
      return items[int(0, items.length - 1)]!;
    },
    weighted: <T>(items: ReadonlyArray<readonly [number, T]>): T => {
      const total = items.reduce((sum, [w]) => sum + w, 0);
      let roll = next() * total;
      for (const [w, value] of items) {
        roll -= w;
        if (roll < 0) return value;
      }
      return items[items.length - 1]![1];
    },
    string: (length, alphabet) => {
      const symbols = [...alphabet];
      let out = '';
      for (let i = 0; i < length; i++) out += symbols[int(0, symbols.length - 1)]!;
      return out;
    },
    bytes: (length) => {
      const out = Buffer.alloc(length);
      for (let i = 0; i < length; i++) out[i] = int(0, 255);
      return out;
    },
    fork: (label) => {
      let h = seed ^ 0x9e3779b9;
      for (const ch of label) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
      return createRng(h >>> 0);
    },
  };
  return rng;
}
