// `node --import tsx bench/profile-diff.ts <service.cpuprofile> <requests> <reference.cpuprofile> <requests> [count]`:
// what a service spends per request that its reference does not, function by function. Each
// profile's self time per function is divided by the requests that process answered (as the
// bench printed them, warm-up included, about 1.2× the measured run's), and the functions are
// listed by the difference, largest first, with both sides beside it, in µs per request. Start-up
// work (module loading and compiling, schema compilers) is in the profile too: it shows as rows
// the reference has little of (wrapSafe, compileSourceTextModule, ajv's and fast-json-stringify's
// builders), to be read as such. Idle time is left out.
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface Profile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number } }>;
  samples: number[];
  timeDeltas: number[];
}

/** Self time by function (name, file and line), in µs. */
function selfTimes(file: string): Map<string, number> {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const self = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)!;
    if (frame.functionName === '(idle)') return;
    const where = frame.url ? ` ${path.basename(frame.url)}:${frame.lineNumber + 1}` : '';
    const name = `${frame.functionName || '(anonymous)'}${where}`;
    self.set(name, (self.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  return self;
}

const [serviceFile, serviceRequests, referenceFile, referenceRequests, count = '40'] = process.argv.slice(2);
if (!serviceFile || !serviceRequests || !referenceFile || !referenceRequests) {
  throw new Error('usage: profile-diff.ts <service.cpuprofile> <requests> <reference.cpuprofile> <requests> [count]');
}
const service = selfTimes(serviceFile);
const reference = selfTimes(referenceFile);
const perService = Number(serviceRequests);
const perReference = Number(referenceRequests);
const rows = [...new Set([...service.keys(), ...reference.keys()])].map((name) => {
  const own = (service.get(name) ?? 0) / perService;
  const theirs = (reference.get(name) ?? 0) / perReference;
  return { name, own, theirs, more: own - theirs };
});
const total = (side: 'own' | 'theirs') => rows.reduce((sum, r) => sum + r[side], 0);
console.log(
  `busy µs per request: service ${total('own').toFixed(1)}, reference ${total('theirs').toFixed(1)}, difference ${(total('own') - total('theirs')).toFixed(1)}`,
);
console.log('   more  service  reference  function');
for (const r of rows.sort((a, b) => b.more - a.more).slice(0, Number(count))) {
  console.log(`${r.more.toFixed(2).padStart(7)} ${r.own.toFixed(2).padStart(8)} ${r.theirs.toFixed(2).padStart(10)}  ${r.name}`);
}
