import type pg from 'pg';
import { abandonTransaction, isDatabaseUnavailable, type Pool, type PoolClient } from '../../kit/db.js';
import type { SqlStatement } from './sql.js';

// One transaction per REST request on the authenticator pool, as PostgREST runs it: its first
// statement switches to the request's role and publishes its claims, transaction-local, so row-level
// security applies to that role and nothing leaks to the next request on the connection.
//
// The statements reach PostgreSQL in one round trip: each is parsed, bound and executed with its
// own parameters (extended protocol, unnamed statements), and one Sync ends them all. Without an
// explicit BEGIN, the statements up to a Sync are one implicit transaction, committed at the Sync
// and rolled back whole if any fails. This keeps every value a bind parameter, and it works
// through a transaction pooler (PgBouncer in transaction mode), which hands the connection back
// only once the Sync's transaction has ended.
//
// A write whose outcome decides whether it stays (exactly one row for the object media type,
// max-affected) sends BEGIN first instead; after its Sync the transaction is still open, and a
// second round trip commits or rolls it back.

/** The statements of a pipeline, parsed, bound and executed in order, then one Sync. */
class Pipeline implements pg.Submittable {
  callback: ((err: Error | null, rows?: Array<Array<Array<string | null>>>) => void) | undefined;
  private current = 0;
  private readonly rows: Array<Array<Array<string | null>>>;

  constructor(private readonly statements: SqlStatement[]) {
    this.rows = statements.map(() => []);
  }

  submit(connection: pg.Connection): void {
    // Corked, the messages leave in one write.
    const stream = connection.stream as { cork?: () => void; uncork?: () => void };
    stream.cork?.();
    try {
      for (const s of this.statements) {
        connection.parse({ text: s.text, name: '', types: [] }, true);
        connection.bind({ values: s.values }, true);
        connection.execute({}, true);
      }
      connection.sync();
    } finally {
      stream.uncork?.();
    }
  }

  handleRowDescription(): void {}

  handleDataRow(msg: { fields: Array<string | null> }): void {
    this.rows[this.current]?.push(msg.fields);
  }

  handleCommandComplete(): void {
    this.current += 1;
  }

  handleEmptyQuery(): void {
    this.current += 1;
  }

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: pg.Connection & { sendCopyFail(message: string): void }): void {
    connection.sendCopyFail('COPY is not part of a REST request');
  }

  handleCopyData(): void {}

  // pg calls this on an ErrorResponse; the Sync's ReadyForQuery then goes to nobody.
  handleError(err: Error): void {
    this.callback?.(err);
  }

  handleReadyForQuery(): void {
    this.callback?.(null, this.rows);
  }
}

/** Runs the statements as one pipeline; the rows of each statement, in order. */
function pipeline(client: PoolClient, statements: SqlStatement[]): Promise<Array<Array<Array<string | null>>>> {
  return new Promise((resolve, reject) => {
    const query = new Pipeline(statements);
    // Set before client.query, which wraps it with the pool's query timeout.
    query.callback = (err, rows) => (err ? reject(err) : resolve(rows!));
    (client as unknown as { query(q: pg.Submittable): void }).query(query);
  });
}

/** The one row every REST statement answers with (see sql.ts renderStatement). */
export interface StatementResult {
  /** The response body's text. */
  body: string;
  /** Rows read or written. */
  n: number;
  /** The count, when one was asked for. */
  total: number | null;
  /** Rows an upsert inserted (merge-duplicates), else null. */
  inserted: number | null;
  /** The planner's estimate of the count (count=planned|estimated), else null. */
  plannedTotal: number | null;
}

const int = (v: string | null | undefined) => (v === null || v === undefined ? null : Number(v));

function resultOf(rows: Array<Array<string | null>>, explain: Array<Array<string | null>> | null): StatementResult {
  const row = rows[0] ?? [];
  let plannedTotal: number | null = null;
  if (explain) {
    const plan = JSON.parse(explain[0]?.[0] ?? '[]') as Array<{ Plan?: { 'Plan Rows'?: number } }>;
    plannedTotal = plan[0]?.Plan?.['Plan Rows'] ?? null;
  }
  return { body: row[0] ?? '[]', n: int(row[1]) ?? 0, total: int(row[2]), inserted: int(row[3]), plannedTotal };
}

const BEGIN: SqlStatement = { text: 'BEGIN', values: [] };
const ROLLBACK: SqlStatement = { text: 'ROLLBACK', values: [] };

export interface RequestStatements {
  settings: SqlStatement;
  main: SqlStatement;
  /** `EXPLAIN` of the count, for count=planned|estimated. */
  explain: SqlStatement | null;
}

export interface TransactionEnd {
  /** `Prefer: tx=rollback` where allowed, or a setting that rolls every request back. */
  rollback: boolean;
  /** Decides from the result whether the transaction may commit; undefined: it always may. */
  keep?: (result: StatementResult) => boolean;
}

/** Runs one REST request's transaction and returns its result. */
export async function runTransaction(pool: Pool, statements: RequestStatements, end: TransactionEnd): Promise<StatementResult> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const work = [statements.settings, statements.main, ...(statements.explain ? [statements.explain] : [])];
  const explicit = end.rollback || end.keep !== undefined;
  try {
    if (!explicit) {
      const rows = await pipeline(client, work);
      return resultOf(rows[1]!, statements.explain ? rows[2]! : null);
    }
    // One round trip when the end is known in advance (tx=rollback); otherwise a second one ends it.
    const known = end.keep === undefined;
    const rows = await pipeline(client, [BEGIN, ...work, ...(known ? [ROLLBACK] : [])]);
    const result = resultOf(rows[2]!, statements.explain ? rows[3]! : null);
    if (!known) await client.query(!end.rollback && end.keep!(result) ? 'COMMIT' : 'ROLLBACK');
    return result;
  } catch (err) {
    // A failed implicit transaction has already been rolled back by PostgreSQL; an explicit one is
    // left aborted until ROLLBACK.
    if (explicit) broken = await abandonTransaction(client, err);
    else if (isDatabaseUnavailable(err) || !isServerError(err)) broken = err as Error;
    throw err;
  } finally {
    client.release(broken);
  }
}

// An error PostgreSQL answered (it has a SQLSTATE) leaves the connection usable; anything else
// (a timeout, a reset) may not, so that connection is not handed to another request.
function isServerError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}
