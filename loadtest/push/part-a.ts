/**
 * Part (a) of npm run bench:push: widget command → engine delivery latency with push across two
 * gateway nodes over Redis. Every agent's widget sits on one gateway and its engine on the other, in
 * different client processes; widgets send `focus` commands (queued for the engine) at the total
 * rate; engines note when `work` first carries each command_id and ack it at once. Latency is the
 * engine's receive time minus the widget's send time (performance.timeOrigin + performance.now(),
 * same machine), joined on command_id through the store (request_id → id), so a command answered
 * late still counts. Optional lower rates run first on the same sockets (the capacity curve); the
 * target rate runs last, since an overload leaves a backlog behind it. The store is audited.
 */
import pg from 'pg';
import { LIMITS } from '../../shared/limits.js';
import type { Pool } from './pool.js';
import type { Proc } from './procs.js';
import type { Counts, Target } from './protocol.js';
import type { Demo, ReadyAgent } from './stack.js';
import { cpuWindow, histogram, recordMs, round, sampleCpu, sleep, summarize, type CpuWindow, type LatencySummary, type OtherPids } from './stats.js';

export interface PartAOptions {
  /** the target rate, run last */
  rate: number;
  /** lower rates run first on the same sockets */
  extraRates: number[];
  seconds: number;
  warmupS: number;
  drainS: number;
  heartbeatMs: number;
  inflight: number;
  gateways: Array<{ proc: Proc; url: string }>;
  api: Proc;
  databaseUrl: string;
  /** pids of Redis, our PostgreSQL backends and the client processes, for the CPU account */
  pidsOf: () => Promise<OtherPids>;
}

export interface RateWindow {
  rate_per_s: number;
  achieved_rate_per_s: number;
  commands: {
    sent: number;
    answered_ok: number;
    answer_errors: Record<string, number>;
    delivered: number;
    delivered_by_heartbeat: number;
    acked: number;
    ack_errors: number;
    /** sent, but not handed to the engine before the drain ended */
    undelivered: number;
  };
  measured: { sent: number; delivered: number };
  /** the widget's command due → engine receives `work` with it */
  latency: LatencySummary;
  /** the widget's command due → its answer on the widget socket (POST /widget/commands' answer) */
  answer_latency: LatencySummary;
  /** whether every measured command was delivered before the drain ended (else the percentiles are lower bounds) */
  complete: boolean;
  cpu: CpuWindow & {
    delivered_in_window: number;
    /** each process's CPU in the window ÷ commands delivered in it (heartbeats and keep-alives included) */
    per_delivered_command_us: Record<string, number>;
    /** our servers, PostgreSQL and Redis, less what they used per second before any command, ÷ commands delivered */
    server_per_command_net_us: number;
  };
  audit: Record<string, unknown>;
}

export interface PartAResult extends RateWindow {
  sockets: { widgets: number; engines: number; opened: number; failed: number; retries: number; errors: Record<string, number>; connect_s: number };
  layout: string;
  warmup_s: number;
  measured_s: number;
  drain_s: number;
  heartbeat_ms: number;
  polling_baseline: { poll_ms: number; mean_staleness_ms: number; ratio_to_push_median: number };
  /** the same processes with every socket connected and engines heartbeating, before any command */
  cpu_idle: CpuWindow & { heartbeats_answered: number; server_cpu_per_heartbeat_us: number | null };
  gateway_memory: { rss_before_mb: number[]; rss_after_mb: number[]; per_connection_bytes: number };
  /** the lower rates run first, same sockets */
  other_rates: RateWindow[];
}

export async function runPartA(pool: Pool, agents: ReadyAgent[], demo: Demo, siteUrl: string, options: PartAOptions): Promise<PartAResult> {
  const workers = pool.size;
  const [g0, g1] = options.gateways;
  // agent i: widget in worker i % W on gateway i % 2; engine in worker (i + 1) % W on the other gateway
  const targets: Target[][] = Array.from({ length: workers }, () => []);
  agents.forEach((agent, i) => {
    targets[i % workers]!.push({ kind: 'widget', url: options.gateways[i % 2]!.url, agent: i, token: agent.widgetToken, origin: demo.allowed_origin });
    targets[(i + 1) % workers]!.push({ kind: 'engine', url: options.gateways[(i + 1) % 2]!.url, agent: i, token: agent.engineToken, origin: siteUrl });
  });

  const before = await Promise.all([g0!.proc.probe(true), g1!.proc.probe(true)]);
  console.log(`  (a) connecting ${agents.length} widgets + ${agents.length} engines over ${workers} client processes …`);
  const opened = await pool.open(targets, options.inflight, 300_000);
  console.log(`      ${opened.opened} up, ${opened.failed} failed, in ${(opened.ms / 1000).toFixed(1)} s`);
  if (opened.failed > 0) console.log(`      errors: ${JSON.stringify(opened.errors)}`);
  // Every window reports ready at once (as a call window does on connect), then every heartbeat_ms.
  const heartbeating = performance.now();
  await pool.all({ op: 'heartbeats', periodMs: options.heartbeatMs });
  for (let c = await pool.counts(); c.heartbeats_answered + c.heartbeat_errors < agents.length && performance.now() - heartbeating < 300_000; c = await pool.counts()) {
    await sleep(200);
  }
  const firstBeats = await pool.counts();
  console.log(`      first heartbeats answered in ${((performance.now() - heartbeating) / 1000).toFixed(1)} s (${firstBeats.heartbeat_errors} errors)`);
  await sleep(2000);
  const after = await Promise.all([g0!.proc.probe(true), g1!.proc.probe(true)]);

  const procs = [options.api, g0!.proc, g1!.proc];
  await pool.reset();
  const idleFrom = await sampleCpu(procs, options.pidsOf);
  await sleep(10_000);
  const idleTo = await sampleCpu(procs, options.pidsOf);
  const idleBeats = (await pool.counts()).heartbeats_answered;
  const idleWindow = cpuWindow(idleFrom, idleTo);
  const serverIdle = Object.entries(idleWindow.cpu_s).filter(([name]) => name !== 'clients').reduce((n, [, s]) => n + s, 0);
  const cpuIdle = { ...idleWindow, heartbeats_answered: idleBeats, server_cpu_per_heartbeat_us: idleBeats > 0 ? round((serverIdle * 1e6) / idleBeats) : null };

  const windows: RateWindow[] = [];
  for (const [index, rate] of [...options.extraRates, options.rate].entries()) {
    windows.push(await rateWindow(pool, procs, options, rate, `w${index}`, idleWindow));
  }
  const main = windows.pop()!;
  await pool.close();

  const sockets = agents.length * 2;
  return {
    ...main,
    sockets: { widgets: agents.length, engines: agents.length, opened: opened.opened, failed: opened.failed, retries: opened.retries, errors: opened.errors, connect_s: round(opened.ms / 1000, 2) },
    layout: `agent i: widget on gateway i % 2, engine on the other gateway; widget in client process i % ${workers}, engine in (i + 1) % ${workers}`,
    warmup_s: options.warmupS,
    measured_s: options.seconds,
    drain_s: options.drainS,
    heartbeat_ms: options.heartbeatMs,
    polling_baseline: {
      poll_ms: LIMITS.pollMs,
      mean_staleness_ms: LIMITS.pollMs / 2,
      ratio_to_push_median: main.latency.p50_ms > 0 ? ratio(LIMITS.pollMs / 2 / main.latency.p50_ms) : 0,
    },
    cpu_idle: cpuIdle,
    gateway_memory: {
      rss_before_mb: before.map((p) => round(p.rss / 2 ** 20, 1)),
      rss_after_mb: after.map((p) => round(p.rss / 2 ** 20, 1)),
      per_connection_bytes: Math.round((after[0]!.rss + after[1]!.rss - before[0]!.rss - before[1]!.rss) / sockets),
    },
    other_rates: windows,
  };
}

/** One rate: warm-up, measured window (CPU sampled over it), drain, then the join and the audit. */
async function rateWindow(pool: Pool, procs: Proc[], options: PartAOptions, rate: number, tag: string, idle: CpuWindow): Promise<RateWindow> {
  const workers = pool.size;
  await pool.reset();
  let cpuFrom: Awaited<ReturnType<typeof sampleCpu>> | undefined;
  const warmupTimer = setTimeout(() => void sampleCpu(procs, options.pidsOf).then((sample) => (cpuFrom = sample)), options.warmupS * 1000);
  console.log(`  (a) ${rate} commands/s: ${options.warmupS} s warm-up, then ${options.seconds} s measured …`);
  const loads = await pool.all<{ sent: number; ms: number }>({ op: 'load', rate: rate / workers, warmupS: options.warmupS, seconds: options.seconds, tag });
  const cpuTo = await sampleCpu(procs, options.pidsOf);
  clearTimeout(warmupTimer);
  cpuFrom ??= cpuTo;

  // Drain: every command answered, delivered and acked — or the drain time is up.
  const drained = (c: Counts) => c.replied + sum(c.reply_errors) >= c.sent && c.delivered >= c.sent && c.acked >= c.delivered;
  let counts = await pool.counts();
  const drainUntil = performance.now() + options.drainS * 1000;
  while (!drained(counts) && performance.now() < drainUntil) {
    await sleep(200);
    counts = await pool.counts();
  }
  const records = await pool.records();
  const ids = await commandIds(options.databaseUrl, tag);

  const received = new Map<number, number>();
  for (const [commandId, at] of records.receives) received.set(commandId, at);
  const latency = histogram();
  const answers = histogram();
  let measuredSent = 0;
  let measuredDelivered = 0;
  let undelivered = 0;
  for (const [answeredId, sentAt, answeredAt, ok, measured, requestId] of records.sends) {
    const commandId = answeredId || ids.get(requestId);
    const at = commandId === undefined ? undefined : received.get(commandId);
    if (at === undefined) undelivered += 1;
    if (!measured) continue;
    measuredSent += 1;
    if (ok) recordMs(answers, answeredAt - sentAt);
    if (at === undefined) continue;
    measuredDelivered += 1;
    recordMs(latency, at - sentAt);
  }
  const cpu = cpuWindow(cpuFrom, cpuTo);
  const deliveredInWindow = Math.max(1, records.receives.filter(([, at]) => at >= cpuFrom!.at && at <= cpuTo.at).length);
  const perCommand: Record<string, number> = {};
  for (const [name, s] of Object.entries(cpu.cpu_s)) perCommand[name] = round((s * 1e6) / deliveredInWindow, 1);
  const serverNet = Object.entries(cpu.cpu_s)
    .filter(([name]) => name !== 'clients')
    .reduce((n, [name, s]) => n + s - ((idle.cpu_s[name] ?? 0) / idle.seconds) * cpu.seconds, 0);
  const summary = summarize(latency);
  console.log(
    `      p50 ${summary.p50_ms} ms, p99 ${summary.p99_ms} ms, max ${summary.max_ms} ms; ${measuredDelivered}/${measuredSent} measured commands delivered; machine ${Math.round(cpu.machine_busy * 100)} % busy`,
  );
  return {
    rate_per_s: rate,
    achieved_rate_per_s: round(loads.reduce((n, l) => n + l.sent, 0) / (Math.max(...loads.map((l) => l.ms)) / 1000), 1),
    commands: {
      sent: counts.sent,
      answered_ok: counts.replied,
      answer_errors: counts.reply_errors,
      delivered: counts.delivered,
      delivered_by_heartbeat: counts.delivered_by_heartbeat,
      acked: counts.acked,
      ack_errors: counts.ack_errors,
      undelivered,
    },
    measured: { sent: measuredSent, delivered: measuredDelivered },
    latency: summary,
    answer_latency: summarize(answers),
    complete: measuredDelivered === measuredSent,
    cpu: { ...cpu, delivered_in_window: deliveredInWindow, per_delivered_command_us: perCommand, server_per_command_net_us: round((Math.max(0, serverNet) * 1e6) / deliveredInWindow) },
    audit: await audit(options.databaseUrl, tag),
  };
}

/** one decimal, or three below 1 (so an overload does not read as 0×) */
const ratio = (value: number) => round(value, value < 1 ? 3 : 1);

const sum = (map: Record<string, number>) => Object.values(map).reduce((n, v) => n + v, 0);

async function withDb<T>(databaseUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** request_id → command id, as the store recorded them. */
function commandIds(databaseUrl: string, tag: string): Promise<Map<string, number>> {
  return withDb(databaseUrl, async (client) => {
    const { rows } = await client.query(`SELECT id, request_id FROM widget_commands WHERE request_id LIKE $1`, [`bench-${tag}-%`]);
    return new Map((rows as Array<{ id: string; request_id: string }>).map((row) => [row.request_id, Number(row.id)]));
  });
}

/** What the store says about one window's commands: statuses, acks, redeliveries, server-side delivery delay. */
function audit(databaseUrl: string, tag: string): Promise<Record<string, unknown>> {
  return withDb(databaseUrl, async (client) => {
    const pattern = `bench-${tag}-%`;
    const byStatus = await client.query(
      `SELECT status, count(*)::int AS commands, sum(acks)::int AS acks, sum(deliveries)::int AS deliveries,
              count(*) FILTER (WHERE acks = 1)::int AS acked_once, count(*) FILTER (WHERE acks > 1)::int AS acked_more_than_once,
              count(*) FILTER (WHERE acks = 0)::int AS never_acked, count(*) FILTER (WHERE deliveries > 1)::int AS redelivered,
              count(*) FILTER (WHERE refused IS NOT NULL)::int AS refused
         FROM widget_commands WHERE request_id LIKE $1 GROUP BY status ORDER BY status`,
      [pattern],
    );
    const [delay] = (
      await client.query(
        `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY delivered_at - created_at) AS p50_ms,
                percentile_cont(0.99) WITHIN GROUP (ORDER BY delivered_at - created_at) AS p99_ms,
                max(delivered_at - created_at) AS max_ms
           FROM widget_commands WHERE request_id LIKE $1 AND delivered_at IS NOT NULL`,
        [pattern],
      )
    ).rows as Array<Record<string, number>>;
    const rows = byStatus.rows as Array<Record<string, number | string>>;
    const total = rows.reduce((n, row) => n + Number(row.commands), 0);
    const done = rows.filter((row) => row.status === 'done').reduce((n, row) => n + Number(row.commands), 0);
    return {
      commands: total,
      all_done: total > 0 && done === total,
      by_status: rows,
      server_created_to_delivered_ms: delay?.p50_ms != null ? { p50: round(Number(delay.p50_ms), 1), p99: round(Number(delay.p99_ms), 1), max: Number(delay.max_ms) } : null,
      note: 'store clock in whole ms: created_at is when the command row was inserted, delivered_at when the push (or a heartbeat) first handed it over; read when the drain ended',
    };
  });
}
