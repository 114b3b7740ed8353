import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';

// Secrets a user did not set are generated once and kept under DATA_DIR, so a
// restart keeps tokens valid. The file is readable by its owner only.

const FILE = 'secrets.json';

async function readAll(dir: string): Promise<Record<string, string>> {
  const file = path.join(dir, FILE);
  if (!existsSync(file)) return {};
  return JSON.parse(await readFile(file, 'utf8')) as Record<string, string>;
}

export async function loadOrCreateSecret(dir: string, name: string, generate: () => string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const all = await readAll(dir);
  const existing = all[name];
  if (existing) return existing;
  all[name] = generate();
  const tmp = path.join(dir, `${FILE}.${process.pid}.tmp`);
  await writeFile(tmp, `${JSON.stringify(all, null, 2)}\n`, { mode: 0o600 });
  await rename(tmp, path.join(dir, FILE));
  return all[name];
}

/** Shows enough of a secret to tell two apart, never enough to use it. */
export function redactSecret(secret: string): string {
  return `${secret.slice(0, Math.min(12, Math.floor(secret.length / 4)))}…`;
}
