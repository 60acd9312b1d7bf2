/**
 * The files that hold a secret for this machine's operators (admin.json, demo.json) are readable by
 * the service's user only, whatever was left where they go (api/private-file.ts).
 */
import { mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, lstatSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { removePrivateFileIf, writePrivateFile } from '../api/private-file.js';

describe('a private file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'c2c-private-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is written 0600 even where a file readable by all was left', () => {
    const path = join(dir, 'demo.json');
    writeFileSync(path, 'old', { mode: 0o644 });
    writePrivateFile(path, '{"server_key":"c2ck_secret"}');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, 'utf8')).toBe('{"server_key":"c2ck_secret"}');
  });

  it('replaces a link planted in its place, and writes nothing through it', () => {
    const target = join(dir, 'elsewhere.txt');
    writeFileSync(target, 'theirs', { mode: 0o644 });
    const path = join(dir, 'admin.json');
    symlinkSync(target, path);
    writePrivateFile(path, 'token');
    expect(lstatSync(path).isSymbolicLink()).toBe(false);
    expect(readFileSync(target, 'utf8')).toBe('theirs');
    expect(readFileSync(path, 'utf8')).toBe('token');
  });

  it('is removed only while it holds what this process wrote', () => {
    const path = join(dir, 'admin.json');
    writePrivateFile(path, 'written by another node');
    removePrivateFileIf(path, (text) => text === 'mine');
    expect(readFileSync(path, 'utf8')).toBe('written by another node');
    removePrivateFileIf(path, (text) => text === 'written by another node');
    expect(() => statSync(path)).toThrow();
    removePrivateFileIf(path, () => true); // gone already: nothing to do
  });
});
