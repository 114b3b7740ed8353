// Log lines in tests: the level a test service logs at, and one capture that keeps every JSON
// line a service writes so a test can assert on it.
import { Writable } from 'node:stream';
import type { LogLevel } from '../../src/kit/config.js';

// The log audit (test/log-hygiene/whole-suite.test.ts) runs this whole suite with
// TEST_LOG_LEVEL=debug and searches everything it printed for credentials. Under it, every
// service a test starts logs at that level, and the lines a test captures for its own
// assertions are printed as well, so no line escapes the search.

const auditLevel = process.env.TEST_LOG_LEVEL as LogLevel | undefined;

/** The level a test service logs at: the audit's, else the quiet one the test asks for. */
export function testLogLevel(quiet: LogLevel): LogLevel {
  return auditLevel ?? quiet;
}

/** Prints a captured log chunk too when the audit runs (test files' output is what it reads). */
export function copyForAudit(chunk: Buffer | string): void {
  if (auditLevel) process.stdout.write(chunk);
}

/** A log stream (a service's `logStream`) that keeps everything written to it. */
export class LogCapture extends Writable {
  private readonly chunks: string[] = [];

  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: () => void): void {
    copyForAudit(chunk);
    this.chunks.push(chunk.toString());
    done();
  }

  /** Everything written so far, as written. */
  text(): string {
    return this.chunks.join('');
  }

  /** Every JSON line written so far, parsed. */
  lines(): Array<Record<string, unknown>> {
    return this.text()
      .split('\n')
      .filter((line) => line.length > 0)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }
}
