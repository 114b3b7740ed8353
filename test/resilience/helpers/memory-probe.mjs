// Test-only preload for the soak (node --expose-gc --import <this file>): on
// SIGUSR2 the process runs a full garbage collection and appends its memory
// figures as one JSON line to the file named by SOAK_MEMORY_FILE. Nothing in
// src/ knows about it.
import { appendFileSync } from 'node:fs';

const file = process.env.SOAK_MEMORY_FILE;
if (file && typeof globalThis.gc === 'function') {
  const gc = globalThis.gc;
  process.on('SIGUSR2', async () => {
    // A full GC, a turn of the event loop (finalization callbacks of sockets and buffers run
    // as tasks), then another: the second one frees what those callbacks let go.
    gc();
    await new Promise((resolve) => setTimeout(resolve, 50));
    gc();
    const m = process.memoryUsage();
    appendFileSync(
      file,
      `${JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers })}\n`,
    );
  });
}
