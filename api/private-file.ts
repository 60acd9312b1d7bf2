/**
 * Files that hold a secret for this machine's operators (admin.json: the bridge's token; demo.json:
 * the demo's server key), readable by the service's user only.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Writes the file anew, never into what is there: a file left with wider permissions (mode applies
 * only when a file is created) or a link planted in its place would show the secret to others.
 * Another node on this host writing the same file at the same moment (both removed it, it created
 * it first) is not a failure: the file is removed and written again.
 */
export function writePrivateFile(path: string, text: string): void {
  for (let attempt = 1; ; attempt += 1) {
    rmSync(path, { force: true });
    try {
      writeFileSync(path, text, { mode: 0o600, flag: 'wx' });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt === 5) throw error;
    }
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
