import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServiceProcess } from '../../helpers/process.js';
import { waitUntil } from './http.js';

// Reads a service process's memory after a forced full GC, through the
// test-only preload memory-probe.mjs (started with --expose-gc).

const probe = fileURLToPath(new URL('./memory-probe.mjs', import.meta.url));

export interface MemorySample {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

export interface MemoryProbe {
  /** Environment for the service process: NODE_OPTIONS and the file the probe writes to. */
  env: Record<string, string>;
  sample(proc: ServiceProcess): Promise<MemorySample>;
  cleanup(): void;
}

export function memoryProbe(): MemoryProbe {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-soak-'));
  const file = path.join(dir, 'memory.jsonl');
  const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : []);
  return {
    env: { NODE_OPTIONS: `--expose-gc --import ${probe}`, SOAK_MEMORY_FILE: file },
    async sample(proc) {
      const before = lines().length;
      proc.child.kill('SIGUSR2');
      await waitUntil(() => lines().length > before, 10_000, 'the memory probe to answer');
      return JSON.parse(lines()[before]!) as MemorySample;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export const mb = (bytes: number) => Number((bytes / 1024 / 1024).toFixed(1));
