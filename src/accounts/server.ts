import { runService } from '../kit/service.js';
import { accounts } from './app.js';

await runService(accounts);
