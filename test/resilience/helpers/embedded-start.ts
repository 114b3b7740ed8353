// One start of the embedded PostgreSQL as a process of its own, so a test can
// watch its files, kill it mid-initdb, or see it fail: starts the cluster in
// the directory given as argument, prints "ready", stops it and exits.
import { startEmbeddedPostgres } from '../../../src/dev/embedded-postgres.js';

const log = { info: () => {}, debug: () => {}, warn: (m: string) => console.error(m) };
try {
  const embedded = await startEmbeddedPostgres(process.argv[2]!, log);
  console.log('ready');
  await embedded.stop();
  process.exit(0);
} catch (err) {
  console.error(`start failed: ${(err as Error).message}`);
  process.exit(1);
}
