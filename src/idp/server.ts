import { runService } from '../kit/service.js';
import { idp } from './app.js';

await runService(idp);
