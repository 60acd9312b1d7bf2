/**
 * Parts (b), (c) and (d) of npm run bench:push: one server process at a time holding N connections
 * from the same client processes — our gateway (`c2c serve --role gateway`, fed by the API node over
 * Redis as in production), raw uWebSockets.js, and Socket.IO on Node's http server — measured the
 * same way in each: memory per held connection (RSS after N minus RSS before, after a forced GC),
 * server CPU per delivered broadcast message (process.cpuUsage() inside the server, idle CPU of an
 * equally long quiet window subtracted), and the time for N connections to come back.
 */
import pg from 'pg';
import type { OpenResult, Snapshot, Target } from './protocol.js';
import { paced, type BroadcastResult } from './control.js';
import type { Pool } from './pool.js';
import type { Proc } from './procs.js';
import { cpuWindow, round, sampleCpu, sleep, type CpuWindow, type OtherPids } from './stats.js';

export interface MemoryFigures {
  sockets: number;
  rss_before_mb: number;
  rss_after_mb: number;
  heap_before_mb: number;
  heap_after_mb: number;
  per_connection_bytes: number;
  heap_per_connection_bytes: number;
  gc_forced: boolean;
  connect: { opened: number; failed: number; retries: number; errors: Record<string, number>; seconds: number };
}

export interface BroadcastFigures {
  members: number;
  rate_per_s: number;
  pushes: number;
  expected_deliveries: number;
  delivered: number;
  payload_bytes: number;
  window_s: number;
  cpu_s: number;
  idle_cpu_s_per_s: number;
  cpu_net_s: number;
  /** server CPU per delivered message: all of it, and without the idle share (keep-alives, timers) */
  per_message_us_gross: number;
  per_message_us_net: number;
  /** the net figure split: user space (the server's own code) and kernel (TCP over loopback, charged to the sender) */
  per_message_user_us_net: number;
  per_message_system_us_net: number;
  /** the machine during the push window: how busy, and how much of it no process of the bench used */
  machine: { busy: number; unaccounted_s: number; clients_s: number };
}

export interface StormFigures {
  sockets: number;
  /** from "go" (the server is up and listening) to the last client back (with its snapshot, for the gateway) */
  seconds: number;
  opened: number;
  failed: number;
  retries: number;
  errors: Record<string, number>;
  /** gateway only: from SIGTERM of the old process to the last client back */
  from_restart_s?: number;
  /** gateway only: the new process starting (SIGTERM → healthy) */
  restart_s?: number;
  snapshots?: Record<string, number>;
  /** gateway only: CPU from "go" to the last client back */
  cpu?: CpuWindow & { server_cpu_per_connection_us: number };
}

const mb = (bytes: number) => round(bytes / 2 ** 20, 1);

/** Warm the server up with a few connections, then measure RSS before and after opening `targets`. */
export async function measureMemory(proc: Proc, pool: Pool, targets: Target[][], warm: Target[][], inflight: number): Promise<MemoryFigures> {
  await pool.open(warm, inflight, 120_000);
  await pool.close();
  await sleep(1000);
  const before = await proc.probe(true);
  const opened = await pool.open(targets, inflight, 300_000);
  await sleep(2000);
  const after = await proc.probe(true);
  const sockets = opened.opened;
  return {
    sockets,
    rss_before_mb: mb(before.rss),
    rss_after_mb: mb(after.rss),
    heap_before_mb: mb(before.heap_used),
    heap_after_mb: mb(after.heap_used),
    per_connection_bytes: Math.round((after.rss - before.rss) / Math.max(1, sockets)),
    heap_per_connection_bytes: Math.round((after.heap_used - before.heap_used) / Math.max(1, sockets)),
    gc_forced: after.gc,
    connect: openFigures(opened),
  };
}

function openFigures(opened: OpenResult) {
  return { opened: opened.opened, failed: opened.failed, retries: opened.retries, errors: opened.errors, seconds: round(opened.ms / 1000, 2) };
}

const cpuUs = async (proc: Proc) => {
  const reply = await proc.probe(false);
  return { user: reply.cpu_us.user, system: reply.cpu_us.system };
};

/**
 * Idle window, then a push window: `push()` sends the broadcasts (paced by the caller) and resolves
 * with how many left; the window closes when the clients received all of them (or after 15 s).
 */
export async function measureBroadcast(
  proc: Proc,
  pool: Pool,
  options: { rate: number; seconds: number; members: number; payloadBytes: number; pidsOf: () => Promise<OtherPids> },
  push: () => Promise<BroadcastResult>,
): Promise<BroadcastFigures> {
  await sleep(1000);
  const idleFrom = await cpuUs(proc);
  const idleStart = performance.now();
  await sleep(options.seconds * 1000);
  const idleTo = await cpuUs(proc);
  const idleSeconds = (performance.now() - idleStart) / 1000;
  const idleUserPerS = (idleTo.user - idleFrom.user) / 1e6 / idleSeconds;
  const idleSystemPerS = (idleTo.system - idleFrom.system) / 1e6 / idleSeconds;

  await pool.reset();
  const machineFrom = await sampleCpu([], options.pidsOf);
  const from = await cpuUs(proc);
  const start = performance.now();
  const pushed = await push();
  const expected = pushed.pushes * options.members;
  let delivered = (await pool.counts()).states;
  for (let i = 0; i < 150 && delivered < expected; i += 1) {
    await sleep(100);
    delivered = (await pool.counts()).states;
  }
  const to = await cpuUs(proc);
  const window = (performance.now() - start) / 1000;
  const machine = cpuWindow(machineFrom, await sampleCpu([], options.pidsOf));
  const user = (to.user - from.user) / 1e6;
  const system = (to.system - from.system) / 1e6;
  const cpu = user + system;
  // The split may come out below zero (getrusage samples it: report.ts); only the total is floored.
  const netUser = user - idleUserPerS * window;
  const netSystem = system - idleSystemPerS * window;
  const net = Math.max(0, netUser + netSystem);
  const per = (seconds: number) => round((seconds * 1e6) / Math.max(1, delivered), 3);
  return {
    members: options.members,
    rate_per_s: options.rate,
    pushes: pushed.pushes,
    expected_deliveries: expected,
    delivered,
    payload_bytes: options.payloadBytes,
    window_s: round(window, 3),
    cpu_s: round(cpu, 4),
    idle_cpu_s_per_s: round(idleUserPerS + idleSystemPerS, 4),
    cpu_net_s: round(net, 4),
    per_message_us_gross: per(cpu),
    per_message_us_net: per(net),
    per_message_user_us_net: per(netUser),
    per_message_system_us_net: per(netSystem),
    // the server itself is not in the sample: everything but it and the clients is unaccounted
    machine: { busy: machine.machine_busy, unaccounted_s: round(machine.unaccounted_s - cpu, 3), clients_s: machine.cpu_s.clients ?? 0 },
  };
}

/** Broadcasts through our gateway: availability commands on the API (REST), each pushing the agent's state over Redis. */
export function restPushes(apiPort: number, widgetToken: string, origin: string, rate: number, seconds: number, members: number): () => Promise<BroadcastResult> {
  return async () => {
    const calls: Array<Promise<boolean>> = [];
    let n = 0;
    const { ms } = await paced(rate, seconds, () => {
      n += 1;
      calls.push(
        fetch(`http://127.0.0.1:${apiPort}/api/v1/click2call/widget/commands`, {
          method: 'POST',
          headers: { authorization: `Bearer ${widgetToken}`, origin, 'content-type': 'application/json' },
          body: JSON.stringify({ kind: 'availability', request_id: `bcast-${Date.now()}-${n}`, available: n % 2 === 0 }),
        }).then(async (res) => res.ok && ((await res.json()) as { status?: string }).status === 'done'),
      );
    });
    const results = await Promise.all(calls);
    const failed = results.filter((ok) => !ok).length;
    if (failed > 0) throw new Error(`${failed} availability commands failed`);
    return { pushes: results.length, members, ms };
  };
}

/** Restarts a gateway under its clients and times their return with current snapshots. */
export async function gatewayStorm(
  pool: Pool,
  restart: { stop: () => Promise<void>; start: () => Promise<Proc[]> },
  options: { inflight: number; sockets: number; databaseUrl: string; memberOf: (agent: number) => string; pidsOf: () => Promise<OtherPids> },
): Promise<StormFigures> {
  const t0 = performance.now();
  await restart.stop();
  let counts = await pool.counts();
  for (let i = 0; i < 100 && counts.connected > 0; i += 1) {
    await sleep(50);
    counts = await pool.counts();
  }
  const procs = await restart.start();
  const cpuFrom = await sampleCpu(procs, options.pidsOf);
  // timed from here, as the baselines' storms are: the bench's own sampling above is not the server's time
  const up = performance.now();
  const back = await pool.reconnect(options.inflight, 300_000);
  const done = performance.now();
  const cpu = cpuWindow(cpuFrom, await sampleCpu(procs, options.pidsOf));
  const serverCpu = Object.entries(cpu.cpu_s).filter(([name]) => name !== 'clients').reduce((n, [, s]) => n + s, 0);
  return {
    sockets: options.sockets,
    seconds: round((done - up) / 1000, 3),
    from_restart_s: round((done - t0) / 1000, 3),
    restart_s: round((up - t0) / 1000, 3),
    opened: back.opened,
    failed: back.failed,
    retries: back.retries,
    errors: back.errors,
    snapshots: await checkSnapshots(await pool.snapshots(), options.databaseUrl, options.memberOf),
    cpu: { ...cpu, server_cpu_per_connection_us: round((serverCpu * 1e6) / Math.max(1, back.opened)) },
  };
}

/** Every widget holds the agent's current version (as the store has it now), every engine got its work. */
async function checkSnapshots(snapshots: Snapshot[], databaseUrl: string, memberOf: (agent: number) => string): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const versions = new Map<string, number>();
  try {
    const { rows } = await client.query(`SELECT member_id, version FROM agent_versions WHERE integration_id = 'c2c_demo'`);
    for (const row of rows as Array<{ member_id: string; version: number }>) versions.set(row.member_id, Number(row.version));
  } finally {
    await client.end();
  }
  const out = { widgets: 0, widgets_current: 0, widgets_stale: 0, widgets_without_snapshot: 0, engines: 0, engines_with_work: 0, engines_without_work: 0 };
  for (const snapshot of snapshots) {
    if (snapshot.kind === 'widget') {
      out.widgets += 1;
      if (!snapshot.fresh) out.widgets_without_snapshot += 1;
      else if (snapshot.version === (versions.get(memberOf(snapshot.agent)) ?? 1)) out.widgets_current += 1;
      else out.widgets_stale += 1;
    } else if (snapshot.kind === 'engine') {
      out.engines += 1;
      if (snapshot.fresh) out.engines_with_work += 1;
      else out.engines_without_work += 1;
    }
  }
  return out;
}

/** Closes every client, then times N fresh connections to a running server (raw uWS, Socket.IO). */
export async function freshStorm(pool: Pool, inflight: number, sockets: number): Promise<StormFigures> {
  await pool.close(true);
  await sleep(1500);
  const start = performance.now();
  const back = await pool.reconnect(inflight, 300_000);
  return { sockets, seconds: round((performance.now() - start) / 1000, 3), opened: back.opened, failed: back.failed, retries: back.retries, errors: back.errors };
}
