import { appendFileSync } from 'node:fs';
import type { TestContext } from 'node:test';

// Every resilience test reports what it measured: as a diagnostic line in the
// test output, and as one JSON line per figure set in the file named by
// RESILIENCE_FIGURES (when set), from which the README table is written.

export type Figures = Record<string, string | number | boolean | null | Record<string, number>>;

export function reportFigures(t: TestContext, property: string, figures: Figures): void {
  const line = { property, file: testFileName(), at: new Date().toISOString(), ...figures };
  t.diagnostic(`${property}: ${JSON.stringify(figures)}`);
  const file = process.env.RESILIENCE_FIGURES;
  if (file) appendFileSync(file, `${JSON.stringify(line)}\n`);
}

function testFileName(): string {
  const entry = process.argv.find((a) => a.endsWith('.test.ts'));
  return entry ? entry.slice(entry.lastIndexOf('test/')) : 'unknown';
}

/** Rounds a duration or rate for printing. */
export const round = (value: number, digits = 1): number => Number(value.toFixed(digits));

/** The p-th percentile (0..100) of the values, nearest-rank. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
