/** Shared pieces of the benchmarks: load generators in child processes, scratch databases, result files. */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createPgDatabase } from '../../test/helpers/databases.js';

const run = promisify(execFile);
export const ROOT = join(import.meta.dirname, '..', '..');

export interface CannonResult {
  requests: number;
  rps: number;
  latency_ms: { p50: number; p99: number; mean: number };
  status_codes: Record<string, number>;
  errors: number;
  timeouts: number;
  duration_s: number;
}

/** One autocannon run in a separate process (the spec travels in a file: it may hold thousands of bodies). */
export async function cannon(spec: Record<string, unknown>): Promise<CannonResult> {
  const file = join(tmpdir(), `c2c-cannon-${randomBytes(6).toString('hex')}.json`);
  writeFileSync(file, JSON.stringify(spec));
  try {
    const { stdout } = await run(process.execPath, [join(ROOT, 'loadtest', 'lib', 'cannon.mjs'), file], { maxBuffer: 64 * 1024 * 1024 });
    return JSON.parse(stdout) as CannonResult;
  } finally {
    rmSync(file, { force: true });
  }
}

/** A scratch PostgreSQL database on the server of `baseUrl`, dropped by the returned function. */
export const scratchDatabase = createPgDatabase;

export function writeResult(name: string, data: unknown): string {
  const dir = join(ROOT, 'loadtest', 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.json`);
  writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
  return file;
}
