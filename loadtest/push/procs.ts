/**
 * The child processes of npm run bench:push: servers (started with the probe preloaded, so CPU and
 * memory are sampled inside them) and client workers. Every child is registered here and stopped
 * by stopAll() — on success, on failure, on SIGINT/SIGTERM, and (SIGKILL) when the bench exits —
 * and every child also exits by itself when its IPC channel to the bench closes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import type { ControlReply, ControlRequest } from './control.js';
import type { ProbeReply, ProbeRequest } from './probe.js';

export const LOADTEST = join(import.meta.dirname, '..');
/** USER_HZ: /proc times are in these ticks (100 on Linux x86-64 and arm64). */
const CLOCK_TICKS = 100;
export const ROOT = join(LOADTEST, '..');
const PROBE = join(import.meta.dirname, 'probe.ts');

export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  log: string;
  exited: Promise<number | null>;
  /** resolves when a line of the output matches */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<string>;
  /** CPU time and memory sampled inside the process (after a forced GC when asked) */
  probe(gc?: boolean): Promise<ProbeReply>;
  /** a request to a baseline server's control channel (see control.ts) */
  control<T>(body: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  /** SIGTERM, then SIGKILL after graceMs */
  stop(graceMs?: number): Promise<void>;
}

const running = new Set<Proc>();
let probeIds = 0;

export interface StartOptions {
  name: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  /** extra node flags before the script */
  nodeFlags?: string[];
  logDir: string;
}

/** Starts `node [flags] --import tsx --import probe.ts <args>` with an IPC channel. */
export function startProc(options: StartOptions): Proc {
  const log = join(options.logDir, `${options.name}.log`);
  const out: WriteStream = createWriteStream(log);
  const child = spawn(process.execPath, [...(options.nodeFlags ?? []), '--import', 'tsx', '--import', PROBE, ...options.args], {
    cwd: ROOT,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const lines: string[] = [];
  const watchers: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];
  let buffered = '';
  const onData = (chunk: Buffer) => {
    out.write(chunk);
    buffered += chunk.toString('utf8');
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const line of parts) {
      if (lines.length < 2000) lines.push(line);
      for (const watcher of [...watchers]) {
        if (watcher.pattern.test(line)) {
          watchers.splice(watchers.indexOf(watcher), 1);
          watcher.resolve(line);
        }
      }
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const probes = new Map<number, (reply: ProbeReply) => void>();
  const controls = new Map<number, (reply: ControlReply) => void>();
  child.on('message', (message: unknown) => {
    const reply = message as ProbeReply | ControlReply;
    if (reply?.type === 'probe') probes.get(reply.id)?.(reply);
    if (reply?.type === 'ctl') controls.get(reply.id)?.(reply);
  });
  child.on('error', () => {});
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code, signal) => {
      exitCode = code ?? (signal ? -1 : null);
      out.end();
      running.delete(proc);
      resolve(exitCode);
    }),
  );
  const proc: Proc = {
    name: options.name,
    child,
    pid: child.pid!,
    log,
    exited,
    waitFor(pattern, timeoutMs) {
      const seen = lines.find((line) => pattern.test(line));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${options.name}: no line matching ${pattern} within ${timeoutMs} ms; log ${log}:\n${tail(log)}`)), timeoutMs);
        const watcher = { pattern, resolve: (line: string) => (clearTimeout(timer), resolve(line)) };
        watchers.push(watcher);
        void exited.then((code) => {
          if (!watchers.includes(watcher)) return;
          clearTimeout(timer);
          reject(new Error(`${options.name} exited (${code}) before printing ${pattern}; log ${log}:\n${tail(log)}`));
        });
      });
    },
    probe(gc = false) {
      if (exitCode !== undefined) return Promise.reject(new Error(`${options.name} has exited`));
      const id = ++probeIds;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => (probes.delete(id), reject(new Error(`${options.name}: probe timed out`))), 30_000);
        probes.set(id, (reply) => {
          clearTimeout(timer);
          probes.delete(id);
          resolve(reply);
        });
        child.send({ type: 'probe', id, gc } satisfies ProbeRequest);
      });
    },
    control<T>(body: Record<string, unknown>, timeoutMs = 120_000) {
      if (exitCode !== undefined) return Promise.reject(new Error(`${options.name} has exited`));
      const id = ++probeIds;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => (controls.delete(id), reject(new Error(`${options.name}: control ${JSON.stringify(body)} timed out`))), timeoutMs);
        controls.set(id, (reply) => {
          clearTimeout(timer);
          controls.delete(id);
          if (reply.error) reject(new Error(`${options.name}: ${reply.error}`));
          else resolve(reply.result as T);
        });
        child.send({ ...body, type: 'ctl', id } satisfies ControlRequest);
      });
    },
    async stop(graceMs = 8000) {
      if (exitCode !== undefined) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  running.add(proc);
  return proc;
}

/** Registers a child started elsewhere (the client workers) so stopAll() ends it too. */
export function track(name: string, child: ChildProcess): void {
  const proc: Proc = {
    name,
    child,
    pid: child.pid!,
    log: '',
    exited: new Promise((resolve) => child.once('exit', (code) => (running.delete(proc), resolve(code)))),
    waitFor: () => Promise.reject(new Error('not a server')),
    probe: () => Promise.reject(new Error('not a server')),
    control: () => Promise.reject(new Error('not a server')),
    async stop(graceMs = 3000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await proc.exited;
      clearTimeout(timer);
    },
  };
  running.add(proc);
}

/** Stops every child still running (in parallel). */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((proc) => proc.stop().catch(() => {})));
}

/** Last resort on process exit: no waiting is possible there, so SIGKILL. */
export function killAllNow(): void {
  for (const proc of running) {
    try {
      proc.child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}

export function tail(file: string, lines = 25): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** utime + stime of a process from /proc/<pid>/stat, in microseconds (10 ms ticks on Linux). */
export function procCpuUs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1_000_000) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

/** Busy and total jiffies of the whole machine (/proc/stat), to report how saturated it was. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  const total = values.reduce((sum, value) => sum + value, 0);
  return { busy: total - idle, total };
}
