import { restErrors } from './errors.js';
import { closestName } from './name-hints.js';
import type { ColumnPair, Relationship, SchemaSnapshot } from './schema-cache.js';

// Which relationship an embedded resource names, as PostgREST's findRel (Plan.hs) decides it, and
// its errors in PostgREST's words (Error.hs): PGRST200 when none matches, PGRST201 when several do.

const singleColumn = (columns: ColumnPair[]): ColumnPair | null => (columns.length === 1 ? columns[0]! : null);

/** The foreign key's own column, when it has exactly one (`author_id` in `notes?select=author_id(*)`). */
function matchesFkColumn(name: string, rel: Relationship): boolean {
  if (rel.cardinality.kind === 'm2m') return false;
  return singleColumn(rel.cardinality.columns)?.[0] === name;
}

/** The column the foreign key references, when it has exactly one (`id` in `users!id(*)`). */
function matchesFkRefColumn(name: string, rel: Relationship): boolean {
  if (rel.cardinality.kind === 'm2m') return false;
  return singleColumn(rel.cardinality.columns)?.[1] === name;
}

function matchesConstraint(name: string, rel: Relationship): boolean {
  return rel.cardinality.kind !== 'm2m' && rel.cardinality.constraint === name;
}

function matchesJunction(name: string, rel: Relationship): boolean {
  return rel.cardinality.kind === 'm2m' && rel.cardinality.junction.name === name;
}

function matches(rel: Relationship, target: string, hint: string | null): boolean {
  const ft = rel.foreignTable.name;
  const kind = rel.cardinality.kind;
  if (rel.isSelf) {
    // One foreign key to its own table gives two relationships; the target's spelling picks one:
    // the table's name for the one-to-many, the foreign key's column for the many-to-one.
    if (hint === null) return (target === ft && kind === 'o2m') || (matchesFkColumn(target, rel) && kind === 'm2o');
    return target === ft && kind === 'o2m' && matchesFkRefColumn(hint, rel);
  }
  if (hint === null) {
    return (
      target === ft ||
      (matchesConstraint(target, rel) && !rel.foreignTableIsView) ||
      (matchesFkColumn(target, rel) && !rel.foreignTableIsView)
    );
  }
  return (
    target === ft &&
    (matchesConstraint(hint, rel) || matchesFkColumn(hint, rel) || matchesFkRefColumn(hint, rel) || matchesJunction(hint, rel))
  );
}

const CARDINALITY_WORDS = { m2o: 'many-to-one', o2m: 'one-to-many', o2o: 'one-to-one', m2m: 'many-to-many' } as const;

/** One relationship as PGRST201 lists it in details. */
function describe(rel: Relationship): Record<string, string> {
  const cols = (names: string[]) => `(${names.join(', ')})`;
  const t = rel.table.name;
  const ft = rel.foreignTable.name;
  const c = rel.cardinality;
  const relationship =
    c.kind === 'm2m'
      ? `${c.junction.name} using ${c.constraint1}${cols(c.sourceColumns.map(([, j]) => j))} and ${c.constraint2}${cols(c.targetColumns.map(([, j]) => j))}`
      : `${c.constraint} using ${t}${cols(c.columns.map(([a]) => a))} and ${ft}${cols(c.columns.map(([, b]) => b))}`;
  return { cardinality: CARDINALITY_WORDS[c.kind], embedding: `${t} with ${ft}`, relationship };
}

function disambiguation(rel: Relationship): string {
  const c = rel.cardinality;
  return `'${rel.foreignTable.name}!${c.kind === 'm2m' ? c.junction.name : c.constraint}'`;
}

/** PostgREST's hint for PGRST200: a near miss of the child when the parent has relationships, else of the parent. */
function noRelationshipHint(snapshot: SchemaSnapshot, schema: string, parent: string, child: string): string | null {
  const fromParent = snapshot.relationships(schema, parent);
  if (fromParent.length > 0) {
    const near = closestName(
      child,
      fromParent.map((r) => r.foreignTable.name),
      { inexact: true },
    );
    return near === null ? null : `Perhaps you meant '${near}' instead of '${child}'.`;
  }
  const near = closestName(parent, snapshot.relationshipOrigins(schema));
  return near === null ? null : `Perhaps you meant '${near}' instead of '${parent}'.`;
}

/** The one relationship from `origin` that `target` (with its `!hint`) names. */
export function findRelationship(
  snapshot: SchemaSnapshot,
  schema: string,
  origin: string,
  target: string,
  hint: string | null,
): Relationship {
  const found = snapshot.relationships(schema, origin).filter((rel) => matches(rel, target, hint));
  if (found.length === 1) return found[0]!;
  if (found.length === 0) {
    throw restErrors.noRelationship(origin, target, hint, schema, noRelationshipHint(snapshot, schema, origin, target));
  }
  throw restErrors.ambiguousRelationship(
    origin,
    target,
    found.map(describe),
    `Try changing '${target}' to one of the following: ${found.map(disambiguation).join(', ')}. Find the desired relationship in the 'details' key.`,
  );
}
