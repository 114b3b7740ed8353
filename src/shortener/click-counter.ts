// Group commit for clicks. Every redirect waits until its own click is
// committed, but concurrent redirects share one UPDATE: while batches are being
// written, new clicks gather and go out together as the next batch. Under load
// a batch holds many clicks, so throughput grows with concurrency while each
// response still follows its durable increment. One batch is in flight per
// instance (several contend for the same hot rows' locks and measured slower);
// the batch size, not the number of statements, grows with load.

type AddClicks = (codes: string[], counts: number[]) => Promise<Map<string, string>>;

interface Waiter {
  resolve: (url: string | undefined) => void;
  reject: (err: unknown) => void;
}

export class ClickCounter {
  private pending = new Map<string, Waiter[]>();
  private writing = false;
  private scheduled = false;

  constructor(private readonly addClicks: AddClicks) {}

  /** Counts one click; resolves with the link's URL once committed, or undefined for an unknown code. */
  record(code: string): Promise<string | undefined> {
    return new Promise((resolve, reject) => {
      const waiters = this.pending.get(code);
      if (waiters) waiters.push({ resolve, reject });
      else this.pending.set(code, [{ resolve, reject }]);
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
    try {
      const urls = await this.addClicks(
        codes,
        codes.map((c) => batch.get(c)!.length),
      );
      for (const code of codes) for (const w of batch.get(code)!) w.resolve(urls.get(code));
    } catch (err) {
      // The statement is atomic: none of these clicks were counted, and every waiter hears so.
      for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
    } finally {
      this.writing = false;
      if (this.pending.size > 0) this.schedule();
    }
  }
}
