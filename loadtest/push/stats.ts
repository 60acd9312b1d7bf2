/** Figures for npm run bench:push: HDR latency histograms and CPU windows over several processes. */
import hdr from 'hdr-histogram-js';
import type { Proc } from './procs.js';
import { machineCpu, procCpuUs } from './procs.js';

export interface LatencySummary {
  count: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  p999_ms: number;
  max_ms: number;
  mean_ms: number;
  /** the whole histogram (microseconds), HdrHistogram compressed base64, for re-analysis */
  hdr_base64: string;
}

/** A histogram of microseconds, 1 µs to 2 min, 3 significant digits. */
export function histogram() {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: 3 });
}

export type Histogram = ReturnType<typeof histogram>;

export function recordMs(h: Histogram, ms: number): void {
  h.recordValue(Math.min(120_000_000, Math.max(1, Math.round(ms * 1000))));
}

const ms = (us: number) => Math.round(us) / 1000;

export function summarize(h: Histogram): LatencySummary {
  return {
    count: h.totalCount,
    p50_ms: ms(h.getValueAtPercentile(50)),
    p90_ms: ms(h.getValueAtPercentile(90)),
    p99_ms: ms(h.getValueAtPercentile(99)),
    p999_ms: ms(h.getValueAtPercentile(99.9)),
    max_ms: ms(h.maxValue),
    mean_ms: ms(h.mean),
    hdr_base64: h.totalCount > 0 ? hdr.encodeIntoCompressedBase64(h) : '',
  };
}

/** CPU of named server processes (sampled inside each, process.cpuUsage()), of other processes from /proc, and of the machine. */
export interface CpuSample {
  /** ms since the epoch (the clients' time base) */
  at: number;
  procs: Record<string, number>;
  /** group → pid → CPU µs */
  others: Record<string, Record<number, number>>;
  machine: { busy: number; total: number };
}

/** Other processes to account for, by name: Redis, our PostgreSQL backends, the client processes. */
export type OtherPids = Record<string, number[]>;

export async function sampleCpu(procs: Proc[], pidsOf: () => Promise<OtherPids> = async () => ({})): Promise<CpuSample> {
  const [probes, others] = await Promise.all([Promise.all(procs.map(async (proc) => [proc.name, await proc.probe(false)] as const)), pidsOf()]);
  return {
    at: performance.timeOrigin + performance.now(),
    procs: Object.fromEntries(probes.map(([name, reply]) => [name, reply.cpu_us.user + reply.cpu_us.system])),
    others: Object.fromEntries(Object.entries(others).map(([name, pids]) => [name, Object.fromEntries(pids.map((pid) => [pid, procCpuUs(pid) ?? 0]))])),
    machine: machineCpu(),
  };
}

export interface CpuWindow {
  seconds: number;
  /** CPU seconds each process (or group of processes) used in the window */
  cpu_s: Record<string, number>;
  /** share of both cores busy (every process of the machine) */
  machine_busy: number;
  /** CPU seconds of the machine not used by any process above (other work on the machine, the kernel's softirqs) */
  unaccounted_s: number;
}

export function cpuWindow(from: CpuSample, to: CpuSample): CpuWindow {
  const cpu_s: Record<string, number> = {};
  for (const [name, us] of Object.entries(to.procs)) cpu_s[name] = round((us - (from.procs[name] ?? 0)) / 1e6, 4);
  // Per process: a process that started in the window counts whole; one that exited in it is lost
  // (PostgreSQL backends come and go with the pools' idle timeouts).
  for (const [name, pids] of Object.entries(to.others)) {
    const before = from.others[name] ?? {};
    const us = Object.entries(pids).reduce((n, [pid, cpu]) => n + Math.max(0, cpu - (before[Number(pid)] ?? 0)), 0);
    cpu_s[name] = round(us / 1e6, 4);
  }
  const total = to.machine.total - from.machine.total;
  const busy = to.machine.busy - from.machine.busy;
  const accounted = Object.values(cpu_s).reduce((n, s) => n + s, 0);
  return {
    seconds: round((to.at - from.at) / 1000, 3),
    cpu_s,
    machine_busy: total > 0 ? round(busy / total, 3) : 0,
    unaccounted_s: round(busy / 100 - accounted, 3),
  };
}

export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
