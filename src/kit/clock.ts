/** Milliseconds since the epoch. Injected wherever time decides behaviour, so tests can move it. */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

/** A clock tests move by hand. */
export function manualClock(start = Date.UTC(2026, 0, 1)): Clock & { advance(ms: number): void; set(ms: number): void } {
  let now = start;
  const clock = (() => now) as Clock & { advance(ms: number): void; set(ms: number): void };
  clock.advance = (ms) => {
    now += ms;
  };
  clock.set = (ms) => {
    now = ms;
  };
  return clock;
}
