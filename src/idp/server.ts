import { loadConfigOrExit } from '../kit/config.js';
import { runService } from '../kit/service.js';
import { openIdp, prepareIdpRoles } from './bootstrap.js';
import { idpConfig } from './config.js';

const config = loadConfigOrExit(idpConfig);
await runService(
  'idp',
  config,
  async ({ databaseUrl }) => openIdp(config, { databaseUrl }),
  (superuserDatabaseUrl) => prepareIdpRoles(superuserDatabaseUrl, config.IDP_SECRET_KEY),
);
