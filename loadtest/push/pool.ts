/** The client workers of npm run bench:push, as one pool: fork them, ask all or one, merge answers. */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Counts, OpenResult, Records, Snapshot, Target, WorkerReply, WorkerRequest } from './protocol.js';
import { ROOT, track } from './procs.js';

type Without<T> = T extends unknown ? Omit<T, 'id'> : never;
export type Request = Without<WorkerRequest>;

export class Pool {
  readonly workers: ChildProcess[] = [];
  #ids = 0;
  #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();

  constructor(count: number) {
    for (let index = 0; index < count; index += 1) {
      const child = fork(join(import.meta.dirname, 'client-worker.ts'), [], {
        cwd: ROOT,
        execArgv: ['--import', 'tsx'],
        env: { ...process.env, BENCH_WORKER: String(index) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      child.on('message', (message: unknown) => {
        const reply = message as WorkerReply;
        const pending = this.#pending.get(reply.id);
        if (!pending) return;
        this.#pending.delete(reply.id);
        if (reply.ok) pending.resolve(reply.result);
        else pending.reject(new Error(`client worker ${index}: ${reply.error}`));
      });
      child.on('exit', (code) => {
        for (const [id, pending] of this.#pending) {
          pending.reject(new Error(`client worker ${index} exited (${code})`));
          this.#pending.delete(id);
        }
      });
      track(`client-${index}`, child);
      this.workers.push(child);
    }
  }

  get size(): number {
    return this.workers.length;
  }

  ask<T>(index: number, request: Request): Promise<T> {
    const id = ++this.#ids;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.workers[index]!.send({ ...request, id } as WorkerRequest);
    });
  }

  all<T>(request: Request | ((index: number) => Request)): Promise<T[]> {
    return Promise.all(this.workers.map((_, index) => this.ask<T>(index, typeof request === 'function' ? request(index) : request)));
  }

  /** Opens targets[w] on worker w; merged result (ms: the slowest worker). */
  async open(targets: Target[][], inflight: number, timeoutMs: number): Promise<OpenResult> {
    const results = await this.all<OpenResult>((index) => ({ op: 'open', targets: targets[index] ?? [], inflight, timeoutMs }));
    return mergeOpen(results);
  }

  async reconnect(inflight: number, timeoutMs: number): Promise<OpenResult> {
    return mergeOpen(await this.all<OpenResult>({ op: 'reconnect', inflight, timeoutMs }));
  }

  async counts(): Promise<Counts> {
    const all = await this.all<Counts>({ op: 'counts' });
    const sum = all[0]!;
    for (const next of all.slice(1)) {
      for (const key of Object.keys(next) as Array<keyof Counts>) {
        const value = next[key];
        if (typeof value === 'number') (sum[key] as number) += value;
        else for (const [code, n] of Object.entries(value)) (sum[key] as Record<string, number>)[code] = ((sum[key] as Record<string, number>)[code] ?? 0) + n;
      }
    }
    return sum;
  }

  async records(): Promise<Records> {
    const all = await this.all<Records>({ op: 'records' });
    return { sends: all.flatMap((r) => r.sends), receives: all.flatMap((r) => r.receives) };
  }

  async snapshots(): Promise<Snapshot[]> {
    return (await this.all<Snapshot[]>({ op: 'snapshots' })).flat();
  }

  async reset(): Promise<void> {
    await this.all({ op: 'reset' });
  }

  /** Closes every client socket; with `keep`, the workers keep them for a reconnect. */
  async close(keep = false): Promise<void> {
    await this.all({ op: 'close', keep });
  }
}

function mergeOpen(results: OpenResult[]): OpenResult {
  const merged: OpenResult = { opened: 0, failed: 0, retries: 0, errors: {}, ms: 0 };
  for (const result of results) {
    merged.opened += result.opened;
    merged.failed += result.failed;
    merged.retries += result.retries;
    merged.ms = Math.max(merged.ms, result.ms);
    for (const [code, n] of Object.entries(result.errors)) merged.errors[code] = (merged.errors[code] ?? 0) + n;
  }
  return merged;
}

/** Splits a list round robin over `parts` workers. */
export function deal<T>(items: T[], parts: number, worker: (item: T, index: number) => number = (_, index) => index % parts): T[][] {
  const out: T[][] = Array.from({ length: parts }, () => []);
  items.forEach((item, index) => out[worker(item, index)]!.push(item));
  return out;
}
