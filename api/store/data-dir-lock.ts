/**
 * One process at a time on the embedded store's directory. PGlite takes no lock of its own, and two
 * processes writing one directory lose each other's writes, or leave it unable to open at all. The
 * admin bridge sends operator steps into the running server, but a server has no bridge while it
 * starts (before it listens) and while it stops (after it took the bridge down, before the store
 * closed), and two servers may be started on one C2C_DATA_DIR by mistake.
 *
 * The lock is a file beside the directory, made with O_EXCL, naming its holder: the pid and, where
 * /proc says, the process's start time. A holder that is gone (a crash, a kill -9) leaves it
 * behind: the next opener finds that process gone, or its pid now another process (started at
 * another time), and takes the lock over. Released after the store has closed.
 */
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { ConfigError } from '../config.js';

interface Holder {
  pid: number;
  /** the process's start time (jiffies since boot, /proc/<pid>/stat), or null where there is no /proc */
  start: string | null;
}

/** Linux's start time of a process, which tells a pid reused since from the process that held the lock. */
export function startOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name, which may itself hold spaces and parentheses
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function holds(holder: Holder): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: alive, another user's
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return holder.start === null || startOf(holder.pid) === holder.start;
}

function readHolder(file: string): Holder | null {
  try {
    const holder = JSON.parse(readFileSync(file, 'utf8')) as Partial<Holder>;
    return typeof holder.pid === 'number' ? { pid: holder.pid, start: typeof holder.start === 'string' ? holder.start : null } : null;
  } catch {
    return null;
  }
}

/** Takes the lock on `dir` (as `dir`.lock), or throws ConfigError naming the process holding it; returns the release. */
export function lockDataDir(dir: string): () => void {
  const file = `${dir}.lock`;
  const mine: Holder = { pid: process.pid, start: startOf(process.pid) };
  const text = JSON.stringify(mine);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(file, text, { flag: 'wx', mode: 0o600 });
      return () => {
        // only our own: a lock taken over after we were taken for gone is not ours to remove
        if (readHolder(file)?.pid === mine.pid) unlinkSync(file);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = readHolder(file);
    // A file being written this instant reads empty: looked at again, after the next attempt.
    if (holder && holds(holder)) {
      throw new ConfigError(
        `the embedded store in ${dir} is open in process ${holder.pid}${holder.pid === process.pid ? ' (this one)' : ''}: a c2c server starting, running or stopping on this C2C_DATA_DIR, or an operator step run on it. ` +
          `It is never opened twice. Try again in a moment; if no such process runs, remove ${file}.`,
      );
    }
    if (holder) {
      try {
        unlinkSync(file);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
  }
  throw new ConfigError(`could not take the lock ${file} on the embedded store: remove it if no c2c process runs on ${dir}.`);
}
