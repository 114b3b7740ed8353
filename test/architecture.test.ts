import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// The shape of src/ (docs/architecture.md): the kit imports no service, and no module imports
// itself back through others at run time (type-only imports vanish when compiled, so they may).

const src = fileURLToPath(new URL('../src/', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return sourceFiles(file);
    return file.endsWith('.ts') ? [file] : [];
  });
}

/** Each module's run-time imports of other project modules, as absolute paths. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(src)) {
    const text = readFileSync(file, 'utf8');
    const imports: string[] = [];
    for (const m of text.matchAll(/^(?:import|export)\s+(type\s+)?[^'";]*?from\s+'(\.[^']+)'/gm)) {
      if (m[1]) continue;
      imports.push(path.resolve(path.dirname(file), m[2]!.replace(/\.js$/, '.ts')));
    }
    graph.set(file, imports);
  }
  return graph;
}

function cycles(graph: Map<string, string[]>): string[][] {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === 'open') found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

const relative = (file: string) => path.relative(src, file);

describe('the shape of src/', () => {
  const graph = importGraph();

  it('reads every module (the check is not vacuous)', () => {
    assert.ok(graph.size > 150, `${graph.size} modules`);
    assert.ok([...graph.values()].some((imports) => imports.length > 0));
  });

  it('no import loop at run time', () => {
    assert.deepEqual(
      cycles(graph).map((loop) => loop.map(relative).join(' -> ')),
      [],
    );
  });

  it('the kit imports no service', () => {
    const upward = [...graph].flatMap(([file, imports]) =>
      relative(file).startsWith('kit/')
        ? imports.filter((i) => !relative(i).startsWith('kit/')).map((i) => `${relative(file)} -> ${relative(i)}`)
        : [],
    );
    assert.deepEqual(upward, []);
  });

  it('the loop finder finds a loop', () => {
    const loop = new Map([
      ['/a.ts', ['/b.ts']],
      ['/b.ts', ['/a.ts']],
    ]);
    assert.equal(cycles(loop).length, 1);
  });
});
