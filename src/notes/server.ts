// Process entry of the notes service. Notes has no database of its own (its
// rows live behind the identity provider's REST API).
import { loadConfigOrExit } from '../kit/config.js';
import { runServiceWithoutDatabase } from '../kit/service.js';
import { buildApp } from './app.js';
import { notesConfig } from './config.js';

const config = loadConfigOrExit(notesConfig);

await runServiceWithoutDatabase('notes', config, async ({ log }) => {
  log.info(`identity provider ${config.IDP_URL}, token verification ${config.IDP_VERIFY}`);
  return { app: await buildApp(config) };
});
