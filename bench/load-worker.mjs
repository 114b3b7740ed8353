// Runs autocannon in its own process so the load generator never shares an
// event loop with what it measures. Input: JSON on stdin (or as the one
// argument). Output: one JSON line.
import autocannon from 'autocannon';

async function readStdin() {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text;
}

const opts = JSON.parse(process.argv[2] ?? (await readStdin()));

function once({ durationSeconds, amount }) {
  let i = 0;
  const paths = opts.paths;
  const headerSets = opts.headerSets;
  return autocannon({
    url: opts.url,
    connections: opts.connections ?? 50,
    // A fixed amount lets every request finish: a timed run drops the answers
    // still in flight when time is up, which would hide what the server did.
    ...(amount ? { amount } : { duration: durationSeconds }),
    method: opts.method ?? 'GET',
    headers: opts.headers,
    body: opts.body,
    // Redirects are answers to measure, not to follow.
    followRedirects: false,
    requests:
      paths || headerSets
        ? [
            {
              setupRequest: (req) => {
                const n = i++;
                return {
                  ...req,
                  ...(paths && { path: paths[n % paths.length] }),
                  ...(headerSets && { headers: { ...req.headers, ...headerSets[n % headerSets.length] } }),
                };
              },
            },
          ]
        : undefined,
  });
}

const counts = (r) => Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([k, v]) => [k, v.count]));

const all = {};
const duration = opts.durationSeconds ?? 10;
let measured = { durationSeconds: duration };
if (opts.warmupSeconds > 0) {
  // Warm-up by count too; its rate sizes the measured run to about `duration` seconds.
  const warmupAmount = opts.warmupAmount ?? 5000;
  const started = Date.now();
  const w = await once({ amount: warmupAmount });
  for (const [k, v] of Object.entries(counts(w))) all[k] = (all[k] ?? 0) + v;
  if (opts.exactCount) measured = { amount: Math.max(1000, Math.round((warmupAmount / ((Date.now() - started) / 1000)) * duration)) };
} else if (opts.exactCount) {
  throw new Error('exactCount needs a warm-up to size the run');
}
const r = await once(measured);
for (const [k, v] of Object.entries(counts(r))) all[k] = (all[k] ?? 0) + v;
process.stdout.write(
  `${JSON.stringify({
    requests: r.requests.total,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    statusCounts: counts(r),
    statusCountsWithWarmup: all,
    errors: r.errors + r.timeouts,
  })}\n`,
);
