/**
 * One process at a time on the embedded store's directory. PGlite takes no lock of its own, and two
 * processes writing one directory lose each other's writes, or leave it unable to open at all. The
 * admin bridge sends operator steps into the running server, but a server has no bridge while it
 * starts (before it listens) and while it stops (after it took the bridge down, before the store
 * closed), and two servers may be started on one C2C_DATA_DIR by mistake.
 *
 * The lock is a file beside the directory naming its holder: the host, the boot, the pid and the
 * process's start time. It is made whole before it appears (written aside, then hard-linked into
 * place, which fails if one is there), so it is never seen half written. A holder that is gone (a
 * crash, a kill -9, a reboot) leaves it behind: the next opener finds that process gone, or its pid
 * now another process, and takes the lock over, one taker at a time (a second file, `.takeover`,
 * made the same way), removing only the file it judged stale. A holder on another host (a shared
 * volume) cannot be judged from here: refused, saying so. Released after the store has closed.
 */
import { hostname } from 'node:os';
import { linkSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { ConfigError } from '../config.js';

interface Holder {
  host: string;
  /** this boot of the host (/proc/sys/kernel/random/boot_id), or null where there is none */
  boot: string | null;
  pid: number;
  /** the process's start time (jiffies since boot, /proc/<pid>/stat), or null where there is no /proc */
  start: string | null;
}

/** How old a takeover file, or a lock file that names nobody, may be before it is taken for left behind. */
const LEFT_BEHIND_MS = 10_000;
const ATTEMPTS = 150;
const ATTEMPT_WAIT_MS = 100;

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

function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
  } catch {
    return null;
  }
}

/** This process, as a lock names it. */
export function thisProcess(): Holder {
  return { host: hostname(), boot: bootId(), pid: process.pid, start: startOf(process.pid) };
}

/** Whether the holder still runs: 'gone', 'alive', or 'elsewhere' (another host: nothing here can tell). */
function judge(holder: Holder): 'gone' | 'alive' | 'elsewhere' {
  const here = thisProcess();
  if (holder.host !== here.host) return 'elsewhere';
  if (holder.boot !== null && here.boot !== null && holder.boot !== here.boot) return 'gone';
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: alive, another user's
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return 'gone';
  }
  return holder.start === null || startOf(holder.pid) === holder.start ? 'alive' : 'gone';
}

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function parseHolder(text: string | null): Holder | null {
  try {
    const holder = JSON.parse(text ?? '') as Partial<Holder>;
    if (typeof holder.pid !== 'number' || typeof holder.host !== 'string') return null;
    return { host: holder.host, boot: holder.boot ?? null, pid: holder.pid, start: holder.start ?? null };
  } catch {
    return null;
  }
}

function olderThan(file: string, ms: number): boolean {
  try {
    return Date.now() - statSync(file).mtimeMs > ms;
  } catch {
    return false;
  }
}

function removeIf(file: string, text: string | null): void {
  if (readText(file) !== text) return;
  try {
    unlinkSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** Makes `file` holding `text`, whole, unless it exists: true when made. */
function create(file: string, text: string): boolean {
  const aside = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  writeFileSync(aside, text, { mode: 0o600 });
  try {
    linkSync(aside, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    unlinkSync(aside);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Takes the lock on `dir` (as `dir`.lock), or throws ConfigError naming the process holding it; resolves to the release. */
export async function lockDataDir(dir: string): Promise<() => void> {
  const file = `${dir}.lock`;
  const takeover = `${file}.takeover`;
  const mine = JSON.stringify(thisProcess());
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (create(file, mine)) {
      // only our own: a lock taken over after we were taken for gone is not ours to remove
      return () => removeIf(file, mine);
    }
    const seen = readText(file);
    const holder = parseHolder(seen);
    const verdict = holder ? judge(holder) : olderThan(file, LEFT_BEHIND_MS) ? 'gone' : 'unread';
    if (verdict === 'alive' || verdict === 'elsewhere') {
      const where = verdict === 'elsewhere' ? ` on host ${holder!.host}` : holder!.pid === process.pid ? ' (this one)' : '';
      throw new ConfigError(
        `the embedded store in ${dir} is open in process ${holder!.pid}${where}: a c2c server starting, running or stopping on this C2C_DATA_DIR, or an operator step run on it. ` +
          `It is never opened twice. Try again in a moment; if no such process runs, remove ${file}.`,
      );
    }
    if (verdict === 'gone') {
      // One taker at a time, and only the file judged stale goes: another taker may have made its own meanwhile.
      if (create(takeover, mine)) {
        try {
          removeIf(file, seen);
        } finally {
          removeIf(takeover, mine);
        }
        continue;
      }
      if (olderThan(takeover, LEFT_BEHIND_MS)) removeIf(takeover, readText(takeover));
    }
    // a file being made, or another taker at work: looked at again shortly
    await sleep(ATTEMPT_WAIT_MS);
  }
  throw new ConfigError(`could not take the lock ${file} on the embedded store: remove it, and ${takeover} if there, if no c2c process runs on ${dir}.`);
}
