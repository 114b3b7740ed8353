// The cost of the visit's country lookup (src/shortener/countries.ts): the time and memory the
// GeoLite2 data takes to load, and the time of one lookup, on a mix of IPv4 and IPv6 addresses
// spread over the whole address space (a cache would not help: the data is already in memory).
// Run: node --import tsx bench/geoip-lookup.ts
import { randomBytes } from 'node:crypto';

const memoryBefore = process.memoryUsage();
const loadStart = performance.now();
const { countryOf } = await import('../src/shortener/countries.js');
const loadMs = performance.now() - loadStart;
const memoryAfter = process.memoryUsage();

const ipv4 = () => [...randomBytes(4)].join('.');
const ipv6 = () =>
  `2${randomBytes(1).toString('hex').slice(1)}${randomBytes(14)
    .toString('hex')
    .replace(/(.{4})(?!$)/g, '$1:')}`.slice(0, 39);
const addresses = Array.from({ length: 100_000 }, (_, i) => (i % 4 === 3 ? ipv6() : ipv4()));

let found = 0;
for (const address of addresses.slice(0, 10_000)) if (countryOf(address)) found++; // warm-up
const rounds: number[] = [];
for (let round = 0; round < 5; round++) {
  const start = performance.now();
  for (const address of addresses) if (countryOf(address)) found++;
  rounds.push(((performance.now() - start) * 1000) / addresses.length);
}
rounds.sort((a, b) => a - b);
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
console.log(`load: ${loadMs.toFixed(0)} ms (synchronous, once at start-up)`);
console.log(
  `memory: +${mb(memoryAfter.rss - memoryBefore.rss)} MiB RSS, +${mb(memoryAfter.arrayBuffers - memoryBefore.arrayBuffers)} MiB buffers`,
);
console.log(
  `lookup: median ${rounds[2]!.toFixed(2)} µs (best ${rounds[0]!.toFixed(2)}, worst ${rounds[4]!.toFixed(2)}) over ${addresses.length} addresses, 1 in 4 IPv6`,
);
console.log(`(placed: ${((found / (addresses.length * 5 + 10_000)) * 100).toFixed(0)}%)`);
