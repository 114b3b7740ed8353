import type { LinkRules } from './link-rules.js';
import type { BatchVisit, ClickRefusal, Granted } from './repository.js';
import type { Visit } from './visits.js';

// Group commit for clicks. Every redirect waits until its own click is
// committed, but concurrent redirects share one statement: while batches are
// being written, new clicks gather and go out together as the next batch. Under
// load a batch holds many clicks, so throughput grows with concurrency while
// each response still follows its durable increment. Each click carries its
// visit, written by the same statement, so a click is never counted without
// its visit or the other way round. One batch is in flight per instance
// (several contend for the same hot rows' locks and measured slower); the
// batch size, not the number of statements, grows with load.

export type AddClicks = (codes: string[], counts: number[], visits: BatchVisit[]) => Promise<Map<string, Granted>>;

/** What became of one click: counted (go to url, or where its rules say), refused (the link is gone or asks for its password, and why), or an unknown code. */
export type ClickOutcome =
  | { counted: true; url: string; rules: LinkRules | null }
  | { counted: false; refusal: ClickRefusal; expires_at: Date | null; max_visits: number | null }
  | undefined;

interface Waiter {
  visit: Visit;
  resolve: (outcome: ClickOutcome) => void;
  reject: (err: unknown) => void;
}

export class ClickCounter {
  private pending = new Map<string, Waiter[]>();
  private writing = false;
  private scheduled = false;

  constructor(private readonly addClicks: AddClicks) {}

  /** Counts one click with its visit; resolves once the batch holding it is committed. */
  record(code: string, visit: Visit): Promise<ClickOutcome> {
    return new Promise((resolve, reject) => {
      const waiters = this.pending.get(code);
      if (waiters) waiters.push({ visit, resolve, reject });
      else this.pending.set(code, [{ visit, resolve, reject }]);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.writing || this.scheduled) return;
    this.scheduled = true;
    // setImmediate lets the clicks that arrive in the same turn of the event loop join the batch.
    setImmediate(() => void this.write());
  }

  private async write(): Promise<void> {
    this.scheduled = false;
    if (this.pending.size === 0) return;
    this.writing = true;
    const batch = this.pending;
    this.pending = new Map();
    const codes = [...batch.keys()].sort();
    const visits: BatchVisit[] = [];
    for (const code of codes) {
      for (const [i, w] of batch.get(code)!.entries()) visits.push({ code, ordinal: i + 1, visit: w.visit });
    }
    try {
      const decided = await this.addClicks(
        codes,
        codes.map((c) => batch.get(c)!.length),
        visits,
      );
      for (const code of codes) {
        const result = decided.get(code);
        // The first `granted` clicks (in arrival order) were counted, the same ones whose visits were written.
        batch.get(code)!.forEach((w, i) => {
          if (!result) w.resolve(undefined);
          else if (i < result.granted) w.resolve({ counted: true, url: result.original_url, rules: result.rules });
          else {
            w.resolve({
              counted: false,
              refusal: result.refusal ?? 'exhausted',
              expires_at: result.expires_at,
              max_visits: result.max_visits,
            });
          }
        });
      }
    } catch (err) {
      // The statement is atomic: none of these clicks or visits were written, and every waiter hears so.
      for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
    } finally {
      this.writing = false;
      if (this.pending.size > 0) this.schedule();
    }
  }
}
