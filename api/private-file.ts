/**
 * Files that hold a secret for this machine's operators (admin.json: the bridge's token; demo.json:
 * the demo's server key), readable by the service's user only.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Writes the file anew, never into what is there: a file left with wider permissions (mode applies
 * only when a file is created) or a link planted in its place would show the secret to others. A
 * new file of its own (exclusive, 0600) is renamed over the path, which replaces whatever is there
 * (a link included, not followed) at once: a reader, or another node on this host writing the same
 * file, never finds it missing or half written.
 */
export function writePrivateFile(path: string, text: string): void {
  const fresh = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(fresh, text, { mode: 0o600, flag: 'wx' });
  try {
    renameSync(fresh, path);
  } catch (error) {
    rmSync(fresh, { force: true });
    throw error;
  }
}

/**
 * Removes the file if it still holds what this process wrote (`mine` tells), not what another node
 * on this host wrote since: that node's operators would lose their way to it.
 */
export function removePrivateFileIf(path: string, mine: (text: string) => boolean): void {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return; // gone already
  }
  if (mine(text)) rmSync(path, { force: true });
}
