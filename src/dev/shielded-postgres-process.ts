// The process that holds `npm start`'s embedded PostgreSQL, started by the
// launcher (shielded-postgres.ts) in a process group of its own: a terminal's
// Ctrl-C goes to its foreground group only, so it reaches the launcher, which
// stops the services first and this process last, and never PostgreSQL while
// the services still write to it. Arguments: DATA_DIR, then the names of the
// services that get a database. Talks to the launcher over the IPC channel;
// when that channel closes (the launcher is gone), it stops PostgreSQL and exits.
import { startEmbeddedPostgres } from './embedded-postgres.js';
import type { ShieldedPostgresMessage } from './shielded-postgres.js';

const [dataDir, ...services] = process.argv.slice(2);
/** Resolves once the message is handed to the channel (an exit right after would lose it otherwise). */
const tell = (message: ShieldedPostgresMessage) =>
  new Promise<void>((resolve) => {
    if (!process.send?.(message, () => resolve())) resolve();
  });
const log = {
  info: (msg: string) => void tell({ type: 'log', level: 'info', msg }),
  warn: (msg: string) => void tell({ type: 'log', level: 'warn', msg }),
  debug: (msg: string) => void tell({ type: 'log', level: 'debug', msg }),
};

let stop = async () => {};
let stopping = false;
/** Once, whatever asks first (the launcher's message, its channel closing, SIGTERM). */
const stopAndExit = () => {
  if (stopping) return;
  stopping = true;
  void stop()
    .catch(() => {})
    .finally(() => process.exit(0));
};
// Not the terminal's to stop: only the launcher's message (or its going away) ends this process.
process.on('SIGINT', () => {});
process.on('SIGTERM', stopAndExit);
process.on('disconnect', stopAndExit);
process.on('message', (message: { type?: string }) => {
  if (message?.type === 'stop') stopAndExit();
});

try {
  if (!dataDir) throw new Error('no data directory given');
  const embedded = await startEmbeddedPostgres(dataDir, log);
  stop = () => embedded.stop();
  const urls: Record<string, string> = {};
  for (const name of services) urls[name] = await embedded.serviceDatabase(name);
  await tell({ type: 'ready', adminUrl: embedded.adminUrl, urls });
} catch (err) {
  await tell({ type: 'failed', message: (err as Error).message });
  await stop().catch(() => {});
  process.exit(1);
}
