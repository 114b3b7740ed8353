// Reading a Prometheus text exposition in tests.
import type { App } from '../../src/kit/http/app.js';

/** The value of the sample `name{labels}` (labels matched exactly, in any order), or undefined. */
export function sampleValue(exposition: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  for (const line of exposition.split('\n')) {
    if (line.startsWith('#') || line.length === 0) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = (match[2] ?? '')
      .split(/,(?=[a-zA-Z_]\w*=")/)
      .filter(Boolean)
      .sort()
      .join(',');
    if (have === wanted) return Number(match[3]);
  }
  return undefined;
}

/** Every label value of every sample, for checking that none holds a request's data. */
export function labelValues(exposition: string): string[] {
  const values: string[] = [];
  for (const line of exposition.split('\n')) {
    if (line.startsWith('#')) continue;
    for (const m of line.matchAll(/[a-zA-Z_]\w*="((?:[^"\\]|\\.)*)"/g)) values.push(m[1]!);
  }
  return values;
}

/** GET /metrics from loopback, asserting it answered. */
export async function scrape(app: App): Promise<string> {
  const res = await app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}: ${res.body}`);
  return res.body;
}
