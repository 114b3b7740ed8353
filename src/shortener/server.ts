import { runService } from '../kit/service.js';
import { shortener } from './app.js';

await runService(shortener);
