import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';

// The shortener parses agents, spots bots, draws QR codes and charts with kept libraries, which ship
// with the service: each must be a runtime dependency under a permissive licence. ua-parser-js 2.x
// is AGPL-3.0, so the 1.x line (MIT) is kept.

const PERMISSIVE = new Set(['MIT', 'ISC', 'BSD-2-Clause', 'BSD-3-Clause', 'Apache-2.0', '0BSD', 'Unlicense']);
const LIBRARIES = ['ua-parser-js', 'isbot', 'qrcode', 'uplot'];

const require = createRequire(import.meta.url);
const project = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> };

describe("the shortener's libraries", () => {
  for (const name of LIBRARIES) {
    it(`${name} is a runtime dependency under a permissive licence`, () => {
      assert.ok(project.dependencies[name], `${name} is not in dependencies`);
      const installed = JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as { version: string; license?: string };
      assert.ok(installed.license && PERMISSIVE.has(installed.license), `${name} ${installed.version} is licensed ${installed.license}`);
    });
  }

  it('ua-parser-js stays on 1.x, in the declared range and the installed version', () => {
    assert.match(project.dependencies['ua-parser-js']!, /^[~^]?1\./);
    const installed = JSON.parse(readFileSync(require.resolve('ua-parser-js/package.json'), 'utf8')) as { version: string };
    assert.match(installed.version, /^1\./);
  });
});
