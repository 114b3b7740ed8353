import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it, test } from 'node:test';
import {
  ConfigError,
  ConfigErrors,
  bool,
  commonVars,
  connectionUrl,
  duration,
  httpUrl,
  int,
  loadConfig,
  oneOf,
  parseDuration,
  str,
} from '../src/kit/config.js';
import { shortenerConfig } from '../src/shortener/config.js';

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigErrors, `expected ConfigErrors, got ${String(err)}`);
    for (const p of err.problems) assert.ok(p instanceof ConfigError);
    return err.problems.map((p) => p.message);
  }
  assert.fail('expected the configuration to be refused');
}

describe('loadConfig', () => {
  it('applies defaults, including defaults computed from other variables', () => {
    const config = loadConfig(shortenerConfig, {});
    assert.equal(config.PORT, 3001);
    assert.equal(config.HOST, '0.0.0.0');
    assert.equal(config.LOG_LEVEL, 'info');
    assert.equal(config.DATA_DIR, './data');
    assert.equal(config.DATABASE_URL, undefined);
    assert.equal(config.REDIS_URL, undefined);
    assert.equal(config.TRUST_PROXY, undefined);
    assert.equal(config.BASE_URL, 'http://127.0.0.1:3001');
    assert.equal(loadConfig(shortenerConfig, { PORT: '8080' }).BASE_URL, 'http://127.0.0.1:8080');
  });

  it('an empty value counts as unset', () => {
    const shape = { NAME: str({ default: 'fallback' }), SECRET: str({ required: true }) };
    assert.equal(loadConfig(shape, { NAME: '', SECRET: 's' }).NAME, 'fallback');
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, { SECRET: '' })),
      ['SECRET is required but not set'],
    );
  });

  it('reports a missing required variable by name', () => {
    const shape = { JWT_SECRET: str({ required: true }) };
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, {})),
      ['JWT_SECRET is required but not set'],
    );
    assert.equal(loadConfig(shape, { JWT_SECRET: 'x' }).JWT_SECRET, 'x');
  });

  it('parses and bounds integers', () => {
    const shape = { N: int({ min: 1, max: 10 }) };
    assert.equal(loadConfig(shape, { N: '7' }).N, 7);
    assert.equal(loadConfig(shape, { N: '10' }).N, 10);
    for (const bad of ['abc', '1.5', '-1', '0x10', '1e3', ' 5', '5 ']) {
      assert.match(problemsOf(() => loadConfig(shape, { N: bad }))[0]!, /^N must be a whole number/, bad);
    }
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, { N: '0' })),
      ['N must be at least 1'],
    );
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, { N: '11' })),
      ['N must be at most 10'],
    );
    assert.deepEqual(
      problemsOf(() => loadConfig(commonVars(3000), { PORT: '65536' })),
      ['PORT must be at most 65535'],
    );
  });

  it('parses booleans strictly', () => {
    const shape = { FLAG: bool({ default: false }) };
    for (const yes of ['true', 'TRUE', '1', 'yes', 'on']) assert.equal(loadConfig(shape, { FLAG: yes }).FLAG, true, yes);
    for (const no of ['false', 'False', '0', 'no', 'off']) assert.equal(loadConfig(shape, { FLAG: no }).FLAG, false, no);
    assert.equal(loadConfig(shape, {}).FLAG, false);
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, { FLAG: 'maybe' })),
      ['FLAG must be true or false, got "maybe"'],
    );
  });

  it('accepts only the listed values for oneOf', () => {
    const shape = { MODE: oneOf(['a', 'b'] as const, { default: 'a' }) };
    assert.equal(loadConfig(shape, { MODE: 'b' }).MODE, 'b');
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, { MODE: 'c' })),
      ['MODE must be one of a, b, got "c"'],
    );
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, { MODE: 'A' })),
      ['MODE must be one of a, b, got "A"'],
    );
  });

  it('accepts only absolute http(s) URLs and drops trailing slashes', () => {
    const shape = { BASE_URL: httpUrl({ required: true }) };
    assert.equal(loadConfig(shape, { BASE_URL: 'https://sho.rt/' }).BASE_URL, 'https://sho.rt');
    assert.equal(loadConfig(shape, { BASE_URL: 'https://sho.rt/x///' }).BASE_URL, 'https://sho.rt/x');
    assert.equal(loadConfig(shape, { BASE_URL: 'http://localhost:3001' }).BASE_URL, 'http://localhost:3001');
    for (const bad of ['ftp://x', 'not a url', '/relative', 'javascript:alert(1)', 'localhost:3001']) {
      assert.match(problemsOf(() => loadConfig(shape, { BASE_URL: bad }))[0]!, /^BASE_URL must be an http\(s\) URL/, bad);
    }
  });

  it('checks connection URLs without echoing them (they may hold a password)', () => {
    const shape = { DATABASE_URL: connectionUrl(['postgres:', 'postgresql:']) };
    assert.equal(loadConfig(shape, { DATABASE_URL: 'postgres://u:p@h/db' }).DATABASE_URL, 'postgres://u:p@h/db');
    const [problem] = problemsOf(() => loadConfig(shape, { DATABASE_URL: 'mysql://user:hunter2@h/db' }));
    assert.equal(problem, 'DATABASE_URL must start with postgres:// or postgresql://');
    assert.doesNotMatch(problem!, /hunter2/);
    assert.equal(problemsOf(() => loadConfig(shape, { DATABASE_URL: 'hunter2 garbage' }))[0], 'DATABASE_URL is not a valid URL');
  });

  it('minBytes counts bytes, not characters', () => {
    const shape = { JWT_SECRET: str({ required: true, minBytes: 32 }) };
    assert.equal(loadConfig(shape, { JWT_SECRET: 'x'.repeat(32) }).JWT_SECRET, 'x'.repeat(32));
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, { JWT_SECRET: 'x'.repeat(31) })),
      ['JWT_SECRET must be at least 32 bytes long'],
    );
    // 16 two-byte characters are 32 bytes.
    assert.equal(loadConfig(shape, { JWT_SECRET: 'é'.repeat(16) }).JWT_SECRET, 'é'.repeat(16));
    assert.deepEqual(
      problemsOf(() => loadConfig(shape, { JWT_SECRET: 'é'.repeat(15) })),
      ['JWT_SECRET must be at least 32 bytes long'],
    );
  });

  it('reports every problem together, in declaration order', () => {
    const shape = {
      ...commonVars(3000),
      JWT_SECRET: str({ required: true, minBytes: 32 }),
      ENABLED: bool(),
    };
    let error: unknown;
    try {
      loadConfig(shape, { PORT: 'abc', LOG_LEVEL: 'loud', DATABASE_URL: 'http://x', ENABLED: 'perhaps' });
    } catch (err) {
      error = err;
    }
    assert.ok(error instanceof ConfigErrors);
    assert.deepEqual(
      error.problems.map((p) => p.variable),
      ['PORT', 'DATABASE_URL', 'LOG_LEVEL', 'JWT_SECRET', 'ENABLED'],
    );
    assert.equal(error.message, error.problems.map((p) => p.message).join('; '));
    assert.match(error.message, /^PORT must be a whole number, got "abc"; /);
  });

  it('ignores variables the shape does not declare', () => {
    const config = loadConfig({ A: str() }, { A: 'a', B: 'b' }) as Record<string, unknown>;
    assert.deepEqual(config, { A: 'a' });
  });
});

describe('loadConfigOrExit', () => {
  async function runScript(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const script = `
      import { loadConfigOrExit, str, int } from './src/kit/config.ts';
      const config = loadConfigOrExit({ API_KEY: str({ required: true, minBytes: 8 }), WORKERS: int({ default: 2 }) });
      console.log(JSON.stringify(config));
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    return { code, stdout, stderr };
  }

  it('prints one line per bad variable and exits 1', async () => {
    const res = await runScript({ WORKERS: 'many' });
    assert.equal(res.code, 1);
    assert.equal(res.stdout, '');
    assert.equal(res.stderr, 'config error: API_KEY is required but not set\nconfig error: WORKERS must be a whole number, got "many"\n');
  });

  it('returns the typed configuration when everything is valid', async () => {
    const res = await runScript({ API_KEY: 'long-enough' });
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(JSON.parse(res.stdout), { API_KEY: 'long-enough', WORKERS: 2 });
  });
});

test('a duration in seconds: 30s, 15m, 1h, 2d, 1h30m and plain seconds', () => {
  const valid: Array<[string, number]> = [
    ['30s', 30],
    ['15m', 900],
    ['1h', 3600],
    ['2d', 172_800],
    ['3600', 3600],
    ['1', 1],
    ['90m', 5400],
    ['1h30m', 5400],
    ['2000ms', 2],
  ];
  for (const [raw, seconds] of valid) assert.equal(parseDuration(raw, 's'), seconds, raw);
});

test('a duration refuses anything else, and what is not a whole number of its unit', () => {
  for (const raw of [
    '',
    '0',
    '0s',
    '-1h',
    '1.5h',
    '1w',
    'h',
    '1 h',
    ' 1h',
    '1h ',
    '1H',
    '1hr',
    'abc',
    '1e3',
    '0x10',
    '99999999999999999999d',
    '1500ms',
    '30s 1m',
    's30',
  ]) {
    assert.equal(parseDuration(raw, 's'), undefined, JSON.stringify(raw));
  }
});

test('a duration in milliseconds: plain milliseconds or with units', () => {
  assert.equal(parseDuration('250', 'ms'), 250);
  assert.equal(parseDuration('250ms', 'ms'), 250);
  assert.equal(parseDuration('30s', 'ms'), 30_000);
  assert.equal(parseDuration('1m30s', 'ms'), 90_000);
  assert.equal(parseDuration('0ms', 'ms'), undefined);
});

test('duration variables: the old plain numbers still load, units too, and off means 0 only where allowed', () => {
  const shape = {
    TIMEOUT_MS: duration({ unit: 'ms', default: 1000, min: 100 }),
    EVERY: duration({ unit: 's', default: 60, off: true }),
  };
  assert.deepEqual(loadConfig(shape, { TIMEOUT_MS: '2500', EVERY: '0' }), { TIMEOUT_MS: 2500, EVERY: 0 });
  assert.deepEqual(loadConfig(shape, { TIMEOUT_MS: '3s', EVERY: '1h' }), { TIMEOUT_MS: 3000, EVERY: 3600 });
  assert.throws(
    () => loadConfig(shape, { TIMEOUT_MS: '0' }),
    /TIMEOUT_MS must be a duration such as 500ms, 30s, 2m or plain milliseconds, got "0"/,
  );
  assert.throws(() => loadConfig(shape, { TIMEOUT_MS: '50ms' }), /TIMEOUT_MS must be at least 100ms/);
});
