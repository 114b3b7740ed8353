import type { StatementPlan } from './plan.js';
import type { SqlStatement } from './sql.js';

// The statements of reads, kept by what decides them (the schema snapshot, the method, the table
// or function, the query string, the schema, the count and the media type), so the same read asked
// again skips parsing, planning and rendering. Who asks does not decide them: the role and claims
// are the transaction's settings, and row-level security is PostgreSQL's. Bounded in entries and in
// the size of each, and emptied whenever the schema cache is reloaded.

export interface PreparedRead {
  plan: StatementPlan;
  statement: SqlStatement;
  explain: SqlStatement | null;
}

const MAX_ENTRIES = 1000;
// A key or a statement longer than this is not kept (at most about 20 MB in all).
const MAX_KEY_CHARS = 4096;
const MAX_STATEMENT_CHARS = 16384;

export class StatementCache {
  private readonly entries = new Map<string, PreparedRead>();
  private version = -1;

  get(version: number, key: string): PreparedRead | undefined {
    if (version !== this.version) {
      this.entries.clear();
      this.version = version;
      return undefined;
    }
    const found = this.entries.get(key);
    if (found) {
      // Most recently used last: the oldest is the first the map iterates.
      this.entries.delete(key);
      this.entries.set(key, found);
    }
    return found;
  }

  set(version: number, key: string, prepared: PreparedRead): void {
    if (version !== this.version || key.length > MAX_KEY_CHARS || prepared.statement.text.length > MAX_STATEMENT_CHARS) return;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, prepared);
  }
}
