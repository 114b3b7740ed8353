// `node --import tsx bench/profile-top.ts <file.cpuprofile> [count]`: the functions with the most
// self time in a V8 CPU profile (as BENCH_CPU_PROF writes them), then the same by module (npm
// package, Node's internals, project file), each as a share of the busy (non-idle) time, for a
// quick reading without DevTools.
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, count = '15'] = process.argv.slice(2);
if (!file) throw new Error('usage: profile-top.ts <file.cpuprofile> [count]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<string, number>();
/** Self time by where the code lives: an npm package, Node's own modules, the project's files, or V8 and native code. */
const byModule = new Map<string, number>();
const moduleOf = (url: string): string => {
  if (url === '') return '(V8 and native code)';
  if (url.startsWith('node:')) return 'node: internals';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  return path.relative(process.cwd(), url.replace(/^file:\/\//, ''));
};
let total = 0;
profile.samples.forEach((id, i) => {
  const frame = byId.get(id)!.callFrame;
  const where = frame.url ? `${path.basename(frame.url)}:${frame.lineNumber + 1}` : '';
  const name = `${frame.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
  const dt = profile.timeDeltas[i] ?? 0;
  self.set(name, (self.get(name) ?? 0) + dt);
  if (frame.functionName !== '(idle)') byModule.set(moduleOf(frame.url), (byModule.get(moduleOf(frame.url)) ?? 0) + dt);
  total += dt;
});
const idle = self.get('(idle)') ?? 0;
const busy = total - idle;
console.log(`${file}: ${(total / 1e6).toFixed(1)} s sampled, ${((100 * idle) / total).toFixed(0)}% idle`);
for (const [name, us] of [...self.entries()]
  .filter(([n]) => n !== '(idle)')
  .sort((a, b) => b[1] - a[1])
  .slice(0, Number(count))) {
  console.log(`${((100 * us) / busy).toFixed(1).padStart(5)}% of busy  ${name}`);
}
console.log('by module:');
for (const [name, us] of [...byModule.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(count))) {
  console.log(`${((100 * us) / busy).toFixed(1).padStart(5)}% of busy  ${name}`);
}
