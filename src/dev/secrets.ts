import { existsSync } from 'node:fs';
import { mkdir, open, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isOurProcessRunning } from './processes.js';

// Secrets a user did not set are generated once and kept under DATA_DIR, so a
// restart keeps tokens valid. The file is readable by its owner only.
//
// Several processes may add to the file at once (the launcher's services, or two
// services started by hand on one DATA_DIR): each change is a read, an addition
// and a rewrite, so it runs under a lock file; without it one process's write
// would drop a secret another had just added, and the next start would generate
// a new one (every token signed, or the database password set, with the old one
// lost).

const FILE = 'secrets.json';
const LOCK = `${FILE}.lock`;
/** How long a process waits for another to finish adding its secret before giving up. */
const LOCK_WAIT_MS = 10_000;
const LOCK_RETRY_MS = 10;

async function readAll(dir: string): Promise<Record<string, string>> {
  const file = path.join(dir, FILE);
  if (!existsSync(file)) return {};
  return JSON.parse(await readFile(file, 'utf8')) as Record<string, string>;
}

/** Runs `change` holding the lock file; a lock left by a process that no longer runs is taken over. */
async function withLock<T>(dir: string, change: () => Promise<T>): Promise<T> {
  const lockPath = path.join(dir, LOCK);
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const handle = await open(lockPath, 'wx', 0o600);
      await handle.writeFile(String(process.pid));
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(await readFile(lockPath, 'utf8').catch(() => ''));
      // An empty lock is one being written this instant; only a named, gone holder is stale.
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && !isOurProcessRunning(holder)) {
        await unlink(lockPath).catch(() => {});
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`${lockPath} is held by process ${holder || 'unknown'}; remove it if no service is starting`);
      await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS));
    }
  }
  try {
    return await change();
  } finally {
    await unlink(lockPath).catch(() => {});
  }
}

export async function loadOrCreateSecret(dir: string, name: string, generate: () => string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const existing = (await readAll(dir))[name];
  if (existing) return existing;
  return withLock(dir, async () => {
    // Read again under the lock: another process may have added this very secret meanwhile.
    const all = await readAll(dir);
    const added = all[name];
    if (added) return added;
    all[name] = generate();
    const tmp = path.join(dir, `${FILE}.${process.pid}.tmp`);
    await writeFile(tmp, `${JSON.stringify(all, null, 2)}\n`, { mode: 0o600 });
    await rename(tmp, path.join(dir, FILE));
    return all[name];
  });
}
