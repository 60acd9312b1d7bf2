/**
 * Preloaded (`node --import tsx --import loadtest/push/probe.ts …`) into every server process of
 * npm run bench:push — our gateway and API nodes as well as the baseline servers — so CPU time and
 * memory are sampled the same way inside each of them: process.cpuUsage() and memoryUsage(), after
 * a forced GC when the process runs with --expose-gc. Requests come over the IPC channel the bench
 * opened; when that channel closes (the bench ended or was killed) the process exits, so no server
 * outlives the run. Product code is not touched: this only listens on the IPC channel.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { writeHeapSnapshot } from 'node:v8';

export interface ProbeRequest {
  type: 'probe';
  id: number;
  gc?: boolean;
}

export interface ProbeReply {
  type: 'probe';
  id: number;
  pid: number;
  /** process.cpuUsage(), microseconds since the process started */
  cpu_us: { user: number; system: number };
  rss: number;
  heap_used: number;
  external: number;
  array_buffers: number;
  /** whether a full GC ran before the memory figures */
  gc: boolean;
}

const gc = (globalThis as { gc?: () => void }).gc;

function collect(): boolean {
  if (!gc) return false;
  // Two passes: the first may only queue weak callbacks and finalizers.
  gc();
  gc();
  return true;
}

/**
 * BENCH_HEAP_SNAPSHOT_DIR: a heap snapshot after every memory sample (taken after the sample, which
 * it would inflate; the next sample's RSS is inflated too, so the figures of such a run are not
 * reported), to see what a held socket is made of. A failure only costs the snapshot.
 */
function heapSnapshot(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    writeHeapSnapshot(join(dir, `heap-${process.pid}-${Date.now()}.heapsnapshot`));
  } catch (error) {
    console.error(`probe: no heap snapshot in ${dir}: ${(error as Error).message}`);
  }
}

if (process.send) {
  process.channel?.unref();
  process.on('message', (message: unknown) => {
    const request = message as Partial<ProbeRequest> | null;
    if (!request || request.type !== 'probe' || typeof request.id !== 'number') return;
    const collected = request.gc ? collect() : false;
    const memory = process.memoryUsage();
    const cpu = process.cpuUsage();
    const reply: ProbeReply = {
      type: 'probe',
      id: request.id,
      pid: process.pid,
      cpu_us: { user: cpu.user, system: cpu.system },
      rss: memory.rss,
      heap_used: memory.heapUsed,
      external: memory.external,
      array_buffers: memory.arrayBuffers,
      gc: collected,
    };
    // The snapshot is written before the reply: the bench may stop this process as soon as it has
    // the reply, which would leave a truncated file.
    if (collected && process.env.BENCH_HEAP_SNAPSHOT_DIR) heapSnapshot(process.env.BENCH_HEAP_SNAPSHOT_DIR);
    process.send?.(reply);
  });
  process.on('disconnect', () => process.exit(70));
}
