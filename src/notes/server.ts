// Process entry of the notes service. Notes has no database of its own (its
// rows live behind the identity provider's REST API).
import { runService } from '../kit/service.js';
import { notes } from './app.js';

await runService(notes);
