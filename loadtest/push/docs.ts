/**
 * The "## Push (npm run bench:push)" section of docs/performance.md, written from the result files:
 * loadtest/results/push.json (the full-scale run) and push-capacity.json (part (a) at the largest
 * scale this machine keeps up with), whichever exist. The verdicts and "what limits it" come from
 * the figures, so the page never says more than the files.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PartAResult, RateWindow } from './part-a.js';
import type { MemoryFigures } from './single-node.js';
import { LOADTEST } from './procs.js';
import { judge, pollRatio, verdictText, type Comparison, type ServerResult, type Target } from './report.js';

export const CAPACITY_OUT = 'push-capacity';

export interface BenchResults {
  ran_at: string;
  command: string;
  node: string;
  cpus: number;
  cpu_model?: string;
  open_files_limit: number;
  machine_busy_before_start: number;
  infrastructure?: { postgres_unloaded?: { select_ms: number; select_after_pause_ms?: number; insert_commit_ms: number; synchronous_commit: string } };
  scale: { sockets: number; rate_per_s: number; seconds: number; warmup_s: number; workers: number; heartbeat_ms: number; broadcast_rate_per_s: number; broadcast_seconds: number; extra_rates_per_s: number[]; client?: 'wire' | 'socket.io-client' };
  a?: PartAResult;
  comparison?: Comparison;
  targets: Target[];
}

/** Which Socket.IO client the run's load used (files written before the wire client have no field). */
const clientOf = (run: BenchResults) => run.scale.client ?? 'socket.io-client';
const clientName = (run: BenchResults) => (clientOf(run) === 'wire' ? 'the wire client' : 'socket.io-client');

export function readResults(name: string): BenchResults | undefined {
  const file = join(LOADTEST, 'results', `${name}.json`);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as BenchResults) : undefined;
}

const kb = (bytes: number | undefined) => (bytes === undefined ? '–' : `${(bytes / 1024).toFixed(1)} KB`);
const v = (value: number | undefined, unit = '') => (value === undefined ? '–' : `${value}${unit}`);
const pct = (share: number) => `${Math.round(share * 100)} %`;
const sumOf = (map: Record<string, number>, keep: (name: string) => boolean = () => true) =>
  Object.entries(map)
    .filter(([name]) => keep(name))
    .reduce((n, [, value]) => n + value, 0);
const server = (name: string) => name !== 'clients';

function serverRow(name: string, r: ServerResult): string {
  const b = r.broadcast;
  return `| ${name} | ${kb(r.memory?.per_connection_bytes)} | ${kb(r.memory?.heap_per_connection_bytes)} | ${v(b?.per_message_us_net, ' µs')} | ${v(b?.per_message_user_us_net, ' µs')} | ${v(b?.per_message_system_us_net, ' µs')} | ${v(b?.per_message_us_gross, ' µs')} | ${b ? `${b.delivered}/${b.expected_deliveries}` : '–'} | ${v(r.storm?.seconds, ' s')} |`;
}

function rateRows(windows: RateWindow[]): string[] {
  const lines = ['| commands/s | measured commands delivered | p50 | p99 | max | answer p50 | machine busy (CPU-s used outside the bench) | server CPU per command, net of the idle load (gateways, API, PostgreSQL, Redis) |', '|---|---|---|---|---|---|---|---|'];
  for (const w of windows) {
    const latency = w.latency.count === 0 ? ['–', '–', '–'] : [`${w.latency.p50_ms} ms`, `${w.latency.p99_ms} ms`, `${w.latency.max_ms} ms`];
    lines.push(
      `| ${w.rate_per_s} | ${w.measured.delivered}/${w.measured.sent} | ${latency.join(' | ')} | ${w.answer_latency.count ? `${w.answer_latency.p50_ms} ms` : '–'} | ${pct(w.cpu.machine_busy)} (${Math.max(0, w.cpu.unaccounted_s).toFixed(1)}) | ${!w.cpu.server_per_command_net_us ? '–' : `${(w.cpu.server_per_command_net_us / 1000).toFixed(1)} ms`} |`,
    );
  }
  return lines;
}

function partA(a: PartAResult, title: string): string[] {
  const lines = [title, '', '| | value |', '|---|---|'];
  lines.push(`| sockets | ${a.sockets.opened} up (${a.sockets.widgets} widgets, ${a.sockets.engines} engines), ${a.sockets.failed} failed, all connected in ${a.sockets.connect_s} s |`);
  const idleServer = sumOf(a.cpu_idle.cpu_s, server);
  lines.push(
    `| before any command (${a.cpu_idle.seconds} s, engines heartbeating every ${a.heartbeat_ms / 1000} s) | machine ${pct(a.cpu_idle.machine_busy)} busy (${Math.max(0, a.cpu_idle.unaccounted_s).toFixed(1)} CPU-s of it outside the bench's processes); our servers + PostgreSQL + Redis ${(idleServer / a.cpu_idle.seconds).toFixed(2)} CPU-s per s; ${a.cpu_idle.heartbeats_answered} heartbeats answered, ${v(a.cpu_idle.server_cpu_per_heartbeat_us === null ? undefined : Math.round(a.cpu_idle.server_cpu_per_heartbeat_us / 100) / 10, ' ms')} of server CPU each |`,
  );
  lines.push(
    `| commands at ${a.rate_per_s}/s | ${a.commands.sent} sent (${a.achieved_rate_per_s}/s achieved), ${a.commands.answered_ok} answered ok ${JSON.stringify(a.commands.answer_errors)}, ${a.commands.delivered} delivered (${a.commands.delivered_by_heartbeat} first in a heartbeat answer), ${a.commands.acked} acked, ${a.commands.undelivered} not delivered by the end of the ${a.drain_s} s drain |`,
  );
  lines.push(
    a.latency.count === 0
      ? `| command → engine | nothing delivered |`
      : `| command → engine (measured, ${a.latency.count}) | p50 ${a.latency.p50_ms} ms, p90 ${a.latency.p90_ms} ms, p99 ${a.latency.p99_ms} ms, p99.9 ${a.latency.p999_ms} ms, max ${a.latency.max_ms} ms |`,
  );
  if (a.answer_latency.count) lines.push(`| command → its answer on the widget socket | p50 ${a.answer_latency.p50_ms} ms, p99 ${a.answer_latency.p99_ms} ms |`);
  lines.push(`| polling baseline | mean staleness ${a.polling_baseline.mean_staleness_ms} ms (poll_ms ${a.polling_baseline.poll_ms} ÷ 2)${a.latency.count ? `; ÷ push median = ${pollRatio(a)}×` : ''} |`);
  const srv = a.audit.server_created_to_delivered_ms as Record<string, number> | null;
  const statuses = (a.audit.by_status as Array<Record<string, number | string>>).map((row) => `${row.commands} ${row.status} (${row.acks} acks, ${row.redelivered} handed over more than once)`).join(', ');
  lines.push(`| store audit | ${String(a.audit.commands)} commands: ${statuses || 'none'}${srv ? `; row insert → first hand-over p50 ${Math.round(srv.p50 ?? 0)} ms, p99 ${Math.round(srv.p99 ?? 0)} ms` : ''} |`);
  const per = a.cpu.per_delivered_command_us;
  lines.push(
    `| CPU in the measured window (${a.cpu.seconds} s) | machine ${pct(a.cpu.machine_busy)} busy (${Math.max(0, a.cpu.unaccounted_s).toFixed(1)} CPU-s of it outside the bench's processes); ${Object.entries(a.cpu.cpu_s)
      .map(([name, s]) => `${name} ${s.toFixed(2)} s`)
      .join(', ')}; ${a.cpu.delivered_in_window} commands delivered in it${a.cpu.delivered_in_window > 1 ? ` (${(sumOf(per, server) / 1000).toFixed(1)} ms of server CPU each)` : ''} |`,
  );
  lines.push(`| gateway RSS | ${a.gateway_memory.rss_before_mb.join(' + ')} MB before the sockets, ${a.gateway_memory.rss_after_mb.join(' + ')} MB with them and their first heartbeats |`);
  lines.push('');
  if (a.other_rates.length > 0) {
    lines.push('The same sockets, one rate after the other (lowest first; each window warms up, is measured, then drains):', '');
    lines.push(...rateRows([...a.other_rates, a]), '');
  }
  return lines;
}

/** The verdicts, judged again from the figures (so the wording follows this code, not the run's). */
const verdicts = (results: BenchResults | undefined): Target[] => (results ? judge(results.a, results.comparison) : []);

/** PostgreSQL's part of a window's server CPU, both net of the idle (heartbeat) load. */
function pgShare(w: RateWindow, idle: PartAResult['cpu_idle']): number {
  const net = (name: string) => (w.cpu.cpu_s[name] ?? 0) - ((idle.cpu_s[name] ?? 0) / idle.seconds) * w.cpu.seconds;
  const total = Object.keys(w.cpu.cpu_s)
    .filter(server)
    .reduce((n, name) => n + net(name), 0);
  return total > 0 ? net('postgres') / total : 0;
}

/** From this day on, part (a) times each command from when it was due, not when it was sent (client-worker.ts). */
const TIMED_FROM_DUE = '2026-11-27';

/** What limits each missed target, from the figures. */
/** What a `focus` command costs the servers, and what keeps that low. */
const WHAT_A_COMMAND_COSTS =
  "one PostgreSQL statement with no transaction around it, shared with the other commands its gateway received meanwhile (the INSERT, which finds a replay by its unique request_id and hands the command and the engine's other new work over; the command is decided on the agent's state as its widgets are shown it, cached per agent and dropped by the bus with every version bump, so the read of the agent's engine and call is made only where that cache is cold or cannot tell), the ack's UPDATE (likewise shared; a socket ack waits 10 ms for others to share it, since nothing waits on it), two rate-limit hits (the command's, per client address, and since 2026-11-24 the socket ack's, per engine; each answered by the node far below the limit, sent to Redis within 20 ms with the others of that moment) and the adapter's publish to Redis (the pushes of one turn in one write), and five socket messages. Every statement runs on a generic plan made once per connection: PostgreSQL's own choice re-planned every batch, at three times the cost of running it (api/store/pg.ts). On one machine, one full-scale run each (2026-11-23): p50 8.3 ms, p99 65.5 ms, machine 96 % busy, 1.38 ms of server CPU per command and PostgreSQL 20.3 CPU-s before these; 5.1 ms, 52.8 ms, 86 %, 1.17 ms and 14.9 CPU-s with generic plans and gathered acks; 3.2 ms, 40.2 ms, 82 %, 1.08 ms and 13.0 CPU-s once commands were decided on the cached state (a 2-vCPU Intel Xeon). On stop 13's machine (a 2-vCPU AMD EPYC, whose loopback system calls cost about twice as much), full-scale (a) runs before rate-limit hits stopped waiting on Redis measured p50 19.2 and 12.7 ms, p99 125 and 110 ms, 92 and 91 % busy, Redis 76 and 78 µs of CPU per command; after, p50 13.7 ms (p99 145 ms, 94 % busy), 2.6 ms (p99 44 ms, 76 % busy) and 6.6 ms (p99 312 ms, 88 %), Redis 44, 45 and 46 µs. The figures here are from a 2-vCPU AMD EPYC (2026-11-29 15:37 UTC), latency timed from when each command was due (since 2026-11-27; the runs before, from when it was sent); on a 2-vCPU Intel Xeon on the evening of 2026-11-25, two full runs with the code before that measured p50 9.5 and 3.4 ms, p99 89 and 46 ms, at 95 and 84 % busy, for about the same server CPU per command (1.1 ms). The same machine drifts within a session and between sessions: on 2026-11-24 one full run measured p50 3.6 ms, p99 58 ms, 84 % busy, 1.04 ms of server CPU per command; fifty minutes later, with code that adds nothing to a command's path, p50 8.4 ms, p99 80 ms, 92 % busy, 1.13 ms (a run of part (a) at the earlier commit, side by side with one of the later code, measured 1.07 and 1.09 ms); two hours after that, on a fresh machine of the same kind and again with no change to a command's path, p50 2.0 ms, p99 47 ms, 75 % busy, 1.1 ms (05:49 UTC, with socket acks counted); on the next machine of that kind (08:29 UTC), with code whose command path adds only a check of each socket payload for text the store cannot hold (a walk of a few fields), p50 3.0 ms, p99 44 ms, 83 % busy, 1.3 ms per command: every process used about an eighth more CPU than at 05:49, the bench's own clients (unchanged code: 9.0 against 8.0 CPU-s) and PostgreSQL (13.3 against 11.8) as much as our gateways, so it was the machine that ran slower; on the machine after that (09:48 UTC), whose command path adds a look at each socket event's name and at its connection's unread packets (gateway/guard.ts), p50 2.7 ms, p99 42 ms, 80 % busy, 1.2 ms; on the next (12:29 UTC), which adds a count of the credential's sockets to each handshake and pings every socket every 10 s instead of 25 s (1,000 pings and pongs a second at full scale), p50 1.3 ms, p99 21 ms, 61 % busy, 0.9 ms: a faster machine, whose bench clients used 6.7 CPU-s in the window against 9.0 at 09:48 for the same work; on 2026-11-26 (01:49 UTC), with the same command path (what changed since runs only on a failed ack, and in browsers), p50 2.0 ms, p99 30 ms, 76 % busy, 0.9 ms again, while processes outside the bench took 6.7 CPU-s of the window (0.4 at 12:29); on 2026-11-29 at 07:01 UTC (the re-check below, timed from when each command was due), p50 3.9 ms, p99 41 ms; and at 15:37 UTC (the figures here) on a slower machine of the same kind, saturated from the first command (98 % busy; the bench's own clients, unchanged, used 12.7 CPU-s of the window against 8.4 on 2026-11-26 for the same work), p50 65 ms, p99 288 ms, 0.8 ms of server CPU per command. On that machine, right after, part (a) alone (`BENCH_PARTS=a BENCH_OUT=… npm run bench:push` at each commit; their result files were not kept, the figures are from their printed summaries) with the code of the session's start (58d81bc, in a worktree) measured p50 47.6 ms, p99 347 ms, 98 % busy, 0.9 ms, and with this code p50 43.2 ms, p99 225 ms, 98 % busy, 0.8 ms: the machine's queue for its two cores, not the code, set those figures, and the polling ratio misses with them. At this load the median moves by more than an order of magnitude from run to run and machine to machine with how busy the machine is: two cores are shared by both gateways, the API node, PostgreSQL, Redis and the four client processes, so the time a command waits for a core, not the work it does, sets the latency. What rate-limit hits answered on the node surely took away is a Redis round trip from every command's path and 40 % of Redis's CPU per command. Earlier runs on EPYC machines also showed single stalls of 0.2–0.5 s (the `max` column), even at 5 commands/s with the machine 14 % busy, where 2 of 152 commands waited some 380 ms (the machines of the 2026-11-24 05:49, 08:29, 09:48 and 12:29 UTC runs and of 2026-11-26 01:49 showed none: their longest waits were 116, 102, 101, 125 and 101 ms at full scale, and 25 ms at 2000 sockets); their cause was not found: not the gateways' garbage collection (its longest pause in a run at 300/s was 13 ms, `--trace-gc`), nor PostgreSQL's checkpoints (their sync took 1 ms); besides the bench, the machine runs RabbitMQ, MariaDB, NATS and Mosquitto, and the hypervisor reports steal time. On the Xeon the longest wait at full scale was 158 ms";

/**
 * The floor Socket.IO on uWS sets for (c): its heap per connection (RSS moves by a kilobyte or two
 * from run to run with how the heap grew, so one run's RSS can put either server above the other),
 * plus the least native memory a socket takes, our gateway's own.
 */
function bareFloor(gm: MemoryFigures, bm: MemoryFigures, sm: MemoryFigures | undefined): string {
  const native = gm.per_connection_bytes - gm.heap_per_connection_bytes;
  const floor = bm.heap_per_connection_bytes + native;
  const allowed = sm ? 0.5 * sm.per_connection_bytes : NaN;
  const rss = gm.per_connection_bytes - bm.per_connection_bytes;
  return (
    `Socket.IO on uWS with nothing of ours holds ${kb(bm.per_connection_bytes)} per connection (heap ${kb(bm.heap_per_connection_bytes)}); its heap alone and the native side of our gateway's sockets (${kb(native)}) come to ${kb(floor)}` +
    (floor > allowed ? `, over the ${kb(allowed)} that 0.5× Socket.IO on Node http allows: that is the floor of this stack, so ≤ 0.5× is out of reach for any gateway built on it. ` : '. ') +
    `Our gateway adds ${kb(gm.heap_per_connection_bytes - bm.heap_per_connection_bytes)} of heap to it (its own data and the Redis adapter's); its RSS came out ${rss >= 0 ? `${kb(rss)} over` : `${kb(-rss)} under`} Socket.IO on uWS's in this run. `
  );
}

function limits(main: BenchResults | undefined, capacity: BenchResults | undefined): string[] {
  const out: string[] = [];
  const missed = new Set(verdicts(main).filter((t) => t.met === false).map((t) => t.id));
  const a = main?.a;
  const cap = capacity?.a;
  if (a && (missed.has('a.p99') || missed.has('a.vs_polling') || missed.has('a.audit'))) {
    const ref = cap ?? a;
    const refSockets = cap ? capacity!.scale.sockets : main!.scale.sockets;
    // per-heartbeat cost from an unsaturated idle window: the full-scale one when it kept up (a
    // saturated one answers fewer), where heartbeats arrive at the product's rate and share statements
    const beatsAt = a.cpu_idle.machine_busy < 0.9 ? a : ref;
    const beatsAtSockets = beatsAt === a ? main!.scale.sockets : refSockets;
    const perBeat = beatsAt.cpu_idle.server_cpu_per_heartbeat_us;
    const beatsPerS = main!.scale.sockets / 2 / (a.heartbeat_ms / 1000);
    const answeredPerS = a.cpu_idle.heartbeats_answered / a.cpu_idle.seconds;
    const windows = [...ref.other_rates, ref];
    const kept = windows.filter((w) => w.complete && w.latency.count > 0 && w.latency.p99_ms < 1000);
    const best = kept.at(-1);
    const perCommand = best?.cpu.server_per_command_net_us;
    const cores = main!.cpus;
    const saturated = a.cpu_idle.machine_busy > 0.95;
    const keptUp = a.complete && a.commands.undelivered === 0 && a.latency.count > 0 && a.latency.p99_ms < 1000;
    const state = saturated
      ? 'the machine is saturated before the first command'
      : keptUp && a.cpu.machine_busy < 0.95
        ? `the machine keeps up, ${pct(a.cpu.machine_busy)} busy, and its queues set the tail`
        : keptUp
          ? `the machine delivers every command, but saturated (${pct(a.cpu.machine_busy)} busy), and its queue for the cores sets the latency`
          : 'the machine saturates under the commands';
    out.push(
      `- **(a) at full scale ${state}.** ${main!.scale.sockets / 2} call windows heartbeating every ${a.heartbeat_ms / 1000} s (the product's period) ask for ${Math.round(beatsPerS)} heartbeats/s, and the gateways ping each of the ${main!.scale.sockets} sockets every 10 s (since 2026-11-24; Socket.IO's default is 25 s): ${main!.scale.sockets / 10} pings and as many pongs a second, counted in that idle load. ` +
        (perBeat
          ? `A heartbeat costs about ${(perBeat / 1000).toFixed(1)} ms of server CPU (gateway, API, PostgreSQL, Redis; measured at ${beatsAtSockets} sockets, before any command): one PostgreSQL statement, shared with the other heartbeats its gateway received meanwhile (the engine's row, the acks, the hand-over of its new commands, of those whose ack is overdue and of its dial requests, its calls), and the socket hops; the engine token's checks are cached per token and dropped by the bus when the engine, its integration or its member changes. That is ${((beatsPerS * perBeat) / 1e6).toFixed(1)} cores of work on a ${cores}-core machine that also runs the clients. `
          : '') +
        `In the ${a.cpu_idle.seconds} s before any command the machine was ${pct(a.cpu_idle.machine_busy)} busy and answered ${answeredPerS.toFixed(0)} heartbeats/s${saturated ? ', leaving no CPU for commands' : ''}. ` +
        (keptUp
          ? `At ${main!.scale.rate_per_s}/s a \`focus\` command cost ${(a.cpu.server_per_command_net_us / 1000).toFixed(1)} ms of server CPU on top of that (net of the heartbeat load; PostgreSQL's share ${pct(pgShare(a, a.cpu_idle))}), and ${perCommand ? `${(perCommand / 1000).toFixed(1)} ms at ${best!.rate_per_s}/s on ${refSockets} sockets` : 'more at lower rates'}: ${WHAT_A_COMMAND_COSTS}. The busier a gateway, the more commands share each statement. `
          : perCommand
          ? `A \`focus\` command costs about ${(perCommand / 1000).toFixed(1)} ms of server CPU on top of that (net of the heartbeat load, at ${best!.rate_per_s}/s on ${refSockets} sockets): ${WHAT_A_COMMAND_COSTS}; PostgreSQL's share is ${pct(pgShare(best!, ref.cpu_idle))}. ${cores} cores would carry at most about ${Math.round((cores * 1e6) / perCommand)} commands/s at that rate with no heartbeats and no clients; the statements are shared by more commands the busier a gateway is, so at ${main!.scale.rate_per_s}/s a command cost ${(a.cpu.server_per_command_net_us / 1000).toFixed(1)} ms. `
          : '') +
        `At ${main!.scale.rate_per_s}/s, ${String(a.audit.commands)} of ${a.commands.sent} commands reached the store before the drain ended and ${a.commands.delivered} reached an engine${a.commands.answer_errors.invalid_state ? `; heartbeats stuck in the queues let the reaper mark engines offline (90 s silent), so ${a.commands.answer_errors.invalid_state} commands were refused \`invalid_state\`` : ''}.`,
    );
    // the round trip of the run the figures beside it come from
    const pgc = (cap ? capacity : main)!.infrastructure?.postgres_unloaded;
    if (best) {
      const floor = pgc
        ? ` A PostgreSQL round trip costs ${pgc.select_ms} ms here back to back${pgc.select_after_pause_ms ? ` but ${pgc.select_after_pause_ms} ms after a pause (both processes idle in between, as on a lightly loaded path: waking them costs the difference on this virtual machine)` : ''}, and a command's push leaves after one — the write that records the command and hands it over (the agent's engine and call come from its cached state) — plus the adapter hop to the other gateway, and the socket hops at both ends: some six wake-ups of a sleeping process in a row.`
        : '';
      out.push(
        `- **${keptUp ? 'At lower load, and the floor.' : 'The largest scale measured that kept up, and the floor.'}** ${refSockets} sockets at ${best.rate_per_s} commands/s (machine ${pct(best.cpu.machine_busy)} busy): p50 ${best.latency.p50_ms} ms, p99 ${best.latency.p99_ms} ms, so polling's mean staleness ÷ median = ${(1500 / best.latency.p50_ms).toFixed(0)}× (target 100×); the store's own clock puts row insert → hand-over at p50 ${String((best.audit.server_created_to_delivered_ms as Record<string, number> | null)?.p50 ?? '–')} ms.${floor} Even at ${windows[0]!.rate_per_s} commands/s (machine ${pct(windows[0]!.cpu.machine_busy)} busy) p50 was ${windows[0]!.latency.p50_ms} ms and p99 ${windows[0]!.latency.p99_ms} ms. The p99 is set by the tail of those wake-ups and of the CPU queue on two cores shared by two gateways, the API, PostgreSQL, Redis and four client processes (in that window the bench's own clients used ${(best.cpu.cpu_s.clients ?? 0).toFixed(1)} CPU-s, our gateways ${sumOf(best.cpu.cpu_s, (name) => name.startsWith('gateway')).toFixed(1)}): a database and clients not sharing the gateways' cores, not a faster transport, is what p99 ≤ 5 ms needs.`,
      );
    }
  }
  const c = main?.comparison;
  const g = c?.gateway.broadcast;
  const u = c?.uws.broadcast;
  const io = c?.sio.broadcast;
  const bare = c?.sio_uws?.broadcast;
  if (g?.machine && u?.machine && io?.machine && ['b.vs_uws', 'b.vs_uws_user', 'b.vs_sio', 'b.vs_sio_user'].some((id) => missed.has(id))) {
    out.push(
      `- **(b) CPU per message.** Most of every server's figure is kernel time: over loopback, the sender's \`send()\` also runs the receiving socket's TCP path and wakes the client, and all of it is charged to the server (kernel ${g.per_message_system_us_net} µs per message in our gateway, ${u.per_message_system_us_net} µs in raw uWS, ${io.per_message_system_us_net} µs in Socket.IO on Node http; it moves with how busy the client processes are — they used ${g.machine.clients_s.toFixed(1)}, ${u.machine.clients_s.toFixed(1)} and ${io.machine.clients_s.toFixed(1)} CPU-s in those windows — so the user + kernel ratios are noisy, and one near 1.3× can fall on either side of it from run to run). In user space, the servers' own code (indicative only: the kernel splits a process's time between user and kernel by sampling, and over a window of seconds in a process with a long history the split can be far off, so no verdict rests on it): raw uWS ${u.per_message_user_us_net} µs, our gateway ${g.per_message_user_us_net} µs${bare ? ` (Socket.IO on uWS with nothing of ours: ${bare.per_message_user_us_net} µs, ${bare.per_message_us_net} µs with the kernel's)` : ''}, Socket.IO on Node http ${io.per_message_user_us_net} µs. ` +
        (g.per_message_user_us_net > u.per_message_user_us_net * 1.3 && bare && g.per_message_user_us_net <= bare.per_message_user_us_net * 1.3
          ? `Socket.IO on uWS with nothing of ours spends as much in user space, so the excess over raw uWS is Socket.IO's own: it broadcasts a room with one native \`app.publish\` (its uWS adapter patch), and then socket.io-adapter's \`apply()\` builds a Set of the room's socket ids and looks every socket up in JavaScript, to find long-polling ones (user time per push to ${g.members} members: ${((g.per_message_user_us_net * g.members) / 1000).toFixed(1)} ms in our gateway, ${((bare.per_message_user_us_net * bare.members) / 1000).toFixed(1)} ms in Socket.IO on uWS with nothing of ours, ${((u.per_message_user_us_net * u.members) / 1000).toFixed(1)} ms in raw uWS). What our gateway adds per push — the sharded Redis adapter's message and its decode, the bus message every node gets — is within the noise of these figures. `
          : g.per_message_user_us_net > u.per_message_user_us_net * 1.3
          ? `Socket.IO on uWS already broadcasts a room with one native \`app.publish\` (its uWS adapter patch), so our gateway's extra user time is per push — the sharded Redis adapter's message and its decode, Socket.IO's packet encoding, the bus message every node gets — and above all per member: after the native publish, socket.io-adapter's \`apply()\` builds a Set of the room's socket ids and looks every socket up in JavaScript, to find long-polling ones (user time per push to ${g.members} members: ${((g.per_message_user_us_net * g.members) / 1000).toFixed(1)} ms in our gateway, ${((u.per_message_user_us_net * u.members) / 1000).toFixed(1)} ms in raw uWS). `
          : `Our gateway's user time is no more than raw uWS's in this run: Socket.IO on uWS broadcasts a room with one native \`app.publish\` (its uWS adapter patch), and what it still does in JavaScript per push is of the order of the idle load subtracted from both (keep-alive pings to ${g.members} sockets), so the user-space split is within noise here — the user + kernel figure is the one to judge. `) +
        `Against Socket.IO on Node's http server the user-space gap is a \`ws\` frame and a stream write from JavaScript for every member; the kernel time, similar for both, holds the total ratio to ${(io.per_message_us_net / g.per_message_us_net).toFixed(1)}×${io.per_message_us_net / g.per_message_us_net >= 6 ? '' : ', under the 6× asked'}.`,
    );
  }
  if (c?.gateway.memory && (missed.has('c.bytes') || missed.has('c.vs_sio'))) {
    const gm = c.gateway.memory;
    const one = c.gateway.memory_one_agent;
    const sm = c.sio.memory;
    out.push(
      `- **(c) memory**: ${kb(gm.per_connection_bytes)} RSS per connection in our gateway (JavaScript heap ${kb(gm.heap_per_connection_bytes)}), ${kb(sm?.per_connection_bytes)} on Socket.IO over Node http (heap ${kb(sm?.heap_per_connection_bytes)}), ${kb(c.uws.memory?.per_connection_bytes)} on raw uWS. ` +
        (c.sio_uws?.memory ? bareFloor(gm, c.sio_uws.memory, sm) : '') +
        `Running Socket.IO on uWS saves the native side (RSS beyond the heap: ${kb(gm.per_connection_bytes - gm.heap_per_connection_bytes)} per connection against ${sm ? kb(sm.per_connection_bytes - sm.heap_per_connection_bytes) : '–'} with Node's sockets and \`ws\`), but the heap is what dominates. A heap-snapshot study of our gateway holding 2000 such sockets (half widgets, half windows, each of its own agent; \`BENCH_HEAP_SNAPSHOT_DIR=/tmp/heap BENCH_PARTS=c BENCH_SOCKETS=2000 npm run bench:push\`, objects matched by id against the snapshot taken before the sockets and assigned to their owners by dominator tree; 2026-11-24) put 7.6 KB of heap on each, against 5.9 KB for Socket.IO on uWS with nothing of ours. Socket.IO's own objects are the bulk, some 5.2 KB (engine.io's socket and its uWS transport, Socket.IO's client and socket, the ping timer, the bound listeners of each). Of the 1.8 KB above that floor, most is not the socket's but its credential's and its agent's: the credential check cached per token so that commands and heartbeats skip the store (about 650 B: the session or engine row and its secret hash) and the agent's cached WidgetState and directory entries (about 540 B, shared by an agent's sockets); then the socket's room in the sharded Redis adapter (about 330 B: its handler entry, ioredis's subscription entry, the channel name in several copies; the adapter's room Set only replaces the socket-id room a socket leaves), a widget's token-expiry timer (about 310 B), its entries in the node-local index that endings use (about 250 B), its credential data (about 190 B) and the room names (about 90 B); against which the socket lets go of the upgrade request and of the handshake's headers, query, auth, URL and date string once the handshake has passed (about 650 B less than bare Socket.IO keeps; with a browser's headers, more). After that study the expiry timers gave way to one sweep a second of the node's sockets, a member's few sockets went from a Set to an array in the index, and cached secret hashes were copied out of pg's 8 KB buffer slabs, which each kept alive (gateway/endings.ts, gateway/local-sockets.ts, api/domain/credentials.ts). It was 10.4 KB before an earlier round of trims (2026-11-23): per-socket closures went (the socket handlers are made once per node and called with the socket as \`this\`, one disconnect listener does all the clean-up), the system clock's timers carry no closures, and long-polling CORS no longer runs as an engine.io middleware, which kept a response wrapper with every WebSocket (gateway/cors.ts)` +
        (one ? ` (the ${c.sockets} widget sockets of a single agent opened later took ${kb(one.heap_per_connection_bytes)} of heap each: they share one token and one agent, so the caches above are held once for all of them, and the figure is measured after ${c.sockets} sockets were closed)` : '') +
        `. RSS after a forced GC also depends on how the heap happened to grow, so this figure moves by a few KB from run to run.`,
    );
  }
  const gs = c?.gateway.storm;
  if (gs && c?.uws.storm && missed.has('d.storm')) {
    out.push(
      `- **(d) reconnect storm**: ${gs.opened} clients were back in ${gs.seconds} s against ${c.uws.storm.seconds} s for raw uWS to accept as many. Raw uWS only completes WebSocket handshakes; each of our clients is authenticated against the store (session or engine token, and the agent once per agent) and gets its snapshot read from it (WidgetState, or the engine's pending work) once Redis has confirmed its room's subscription (one PING for the joins that come together), the reads of clients arriving together in shared statements${gs.cpu ? `: ${(gs.cpu.server_cpu_per_connection_us / 1000).toFixed(1)} ms of server CPU per connection (gateway ${gs.cpu.cpu_s['gateway-solo-restarted']?.toFixed(1) ?? '–'} s, PostgreSQL ${gs.cpu.cpu_s.postgres?.toFixed(1) ?? '–'} s, machine ${pct(gs.cpu.machine_busy)} busy)` : ''}. That work is the snapshot the target asks for; on two shared cores it, not the transport, sets the time.` +
        (gs.cpu?.cpu_s.clients
          ? ` The bench's own clients (${clientName(main!)}; a WebSocket handshake, the Socket.IO handshake and the snapshot to parse, each) used ${gs.cpu.cpu_s.clients.toFixed(1)} CPU-s of that window: on ${main!.cpus} cores that alone is ${(gs.cpu.cpu_s.clients / main!.cpus).toFixed(1)} s, against the ${(c.uws.storm.seconds * 1.5).toFixed(2)} s the target allows.`
          : '') +
        (c.sio_uws?.storm
          ? ` Socket.IO on uWS with nothing of ours (no authentication, no snapshot) took ${c.sio_uws.storm.seconds} s to accept as many fresh connections from the same clients, ${(c.sio_uws.storm.seconds / c.uws.storm.seconds).toFixed(2)}× raw uWS: that is the floor of this stack${c.sio_uws.storm.seconds > c.uws.storm.seconds * 1.5 ? ', already over the 1.5× asked' : ''}; our authentication and snapshots add ${(gs.seconds - c.sio_uws.storm.seconds).toFixed(2)} s to it.`
          : '') +
        (c.sio.storm ? ` For scale: Socket.IO on Node's http server, with no authentication and no snapshot, took ${c.sio.storm.seconds} s.` : ''),
    );
  }
  return out;
}

/** The "Clients" bullet of the method: which client the load used, and what the other one cost. */
function clientsMethod(ref: BenchResults, stormClients: number | undefined): string {
  const head = '- **Clients** (every part): `BENCH_WORKERS` processes on the same machine';
  if (clientOf(ref) === 'socket.io-client') return `${head}, using socket.io-client (\`BENCH_CLIENT=socket.io-client\`).`;
  const thisRun = stormClients === undefined ? '' : `, where the wire client's used ${stormClients.toFixed(1)} in this run`;
  return (
    `${head}. Their Socket.IO sockets use the bench's lean wire client (\`loadtest/push/wire-client.ts\`): the Socket.IO v4 protocol spoken over a plain \`ws\` WebSocket — the library the raw uWS clients use — with no Manager, reconnection or upgrade logic, so that the clients, which share the two cores with the servers, take as little of them as they can; \`test/gateway/bench-wire-client.test.ts\` checks it against the real gateway (snapshot, commands and their answers, pushes and acks, refusals, endings). ` +
    `\`BENCH_CLIENT=socket.io-client\` runs the real client instead: in the last full run with it (2026-11-23, before the wire client) its clients used 4.9 CPU-s in the reconnect storm${thisRun}; that run measured the storm at 5.4 s and (a) at p50 53 ms, p99 248 ms.`
  );
}

/** Where a later run of the full bench goes (BENCH_OUT=push-check): the code since, on the machine then. */
export const RECHECK_OUT = 'push-check';

/**
 * (c) is RSS after minus RSS before the sockets, over N: the RSS a process starts from moves by
 * megabytes with how its heap happened to grow, and that alone moves the per-connection figure by
 * hundreds of bytes. The heap per connection, and the RSS with the sockets, say whether the code's
 * memory changed.
 */
function memoryRecheck(main: BenchResults, check: BenchResults): string {
  const m = main.comparison?.gateway.memory;
  const c = check.comparison?.gateway.memory;
  if (!m || !c) return '';
  return `Memory per connection (c) in the re-check: ${c.per_connection_bytes} B of RSS (${m.per_connection_bytes} B above), of which JavaScript heap ${c.heap_per_connection_bytes} B (${m.heap_per_connection_bytes} B); the gateway's RSS with its 10000 sockets ${c.rss_after_mb} MB (${m.rss_after_mb} MB), before them ${c.rss_before_mb} MB (${m.rss_before_mb} MB). Where the heap per connection and the RSS with the sockets are the same, a different figure comes from where the process's RSS stood before the sockets, not from what each connection holds.`;
}

/**
 * Another full run (earlier or later) beside the one the section reports, target by target, with what says how fast
 * its machine was: the baselines and the bench's own clients, whose code did not change.
 */
function recheckLines(main: BenchResults, check: BenchResults): string[] {
  const before = new Map(verdicts(main).map((t) => [t.what, t]));
  const when = (r: BenchResults) => `${r.ran_at.slice(0, 16).replace('T', ' ')} UTC`;
  const clientsPerCommand = (r: BenchResults) => r.a?.cpu.per_delivered_command_us.clients;
  const lines = [
    `### Re-check (\`${check.command}\`, ${when(check)})`,
    '',
    `${check.ran_at < main.ran_at ? 'An earlier full run, with the timing of the run above (from when each command was due), on the machine of that session' : 'The full bench run again after later changes, on the machine of that session'}: ${pct(check.machine_busy_before_start)} busy before the start; raw uWS ${v(check.comparison?.uws.broadcast?.per_message_us_net, ' µs')} of CPU per message (${v(main.comparison?.uws.broadcast?.per_message_us_net, ' µs')} in the run above), 10000 fresh raw uWS connections in ${v(check.comparison?.uws.storm?.seconds, ' s')} (${v(main.comparison?.uws.storm?.seconds, ' s')}), the bench's own clients (unchanged code) ${v(clientsPerCommand(check), ' µs')} of CPU per command (${v(clientsPerCommand(main), ' µs')}); (a)'s machine ${check.a ? pct(check.a.cpu.machine_busy) : '–'} busy (${main.a ? pct(main.a.cpu.machine_busy) : '–'}), our servers' CPU per command net of the idle load ${v(check.a?.cpu.server_per_command_net_us, ' µs')} (${v(main.a?.cpu.server_per_command_net_us, ' µs')}). Raw figures: \`loadtest/results/${RECHECK_OUT}.json\`. Where a machine is slower, its figures are too; what the changes themselves cost shows in our servers' net CPU per command, and where (a)'s machine is saturated its queues, not that work, set the latency (below).`,
    '',
    memoryRecheck(main, check),
    '',
    `| target | wanted | run above (${when(main)}) | re-check (${when(check)}) | re-check's verdict |`,
    '|---|---|---|---|---|',
  ];
  for (const t of verdicts(check)) {
    const then = before.get(t.what);
    lines.push(`| ${t.what} | ${t.target} | ${then?.value ?? '–'} | ${t.value} | ${verdictText(t)} |`);
  }
  lines.push('');
  return lines;
}

export function docsBody(main: BenchResults | undefined, capacity: BenchResults | undefined, check?: BenchResults): string {
  const lines: string[] = [];
  const ref = main ?? capacity!;
  const stormClients = main?.comparison?.gateway.storm?.cpu?.cpu_s.clients;
  lines.push(
    `Measured on this project's machine: ${ref.cpus} CPUs (${ref.cpu_model ?? 'unknown'}), Node ${ref.node}, open-files limit ${ref.open_files_limit} (checked at start: a server holds N sockets). Server, PostgreSQL, Redis and the client processes share the two cores; figures are noisy, and each run records how busy the machine was before it started. Raw figures, with every HDR histogram (compressed base64): \`loadtest/results/push.json\`${capacity ? ' and `loadtest/results/push-capacity.json`' : ''}.`,
    '',
    '```sh',
    '# needs PostgreSQL and Redis (DESIGN.md, install notes) and no test run at the same time: the bus channel names are fixed',
    `DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 ${main?.command ?? 'npm run bench:push'}   # full scale → push.json`,
  );
  if (capacity) lines.push(`DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 ${capacity.command}   # (a) at a scale this machine keeps up with → push-capacity.json`);
  lines.push(
    'BENCH_SOCKETS=200 BENCH_RATE=50 BENCH_SECONDS=5 npm run bench:push   # a small try (about three minutes) → push-small.json',
    '```',
    '',
    'Scale knobs (environment): `BENCH_SOCKETS` (10000), `BENCH_RATE` (1000), `BENCH_EXTRA_RATES` (lower rates run first on the same sockets), `BENCH_SECONDS` (30), `BENCH_WARMUP_SECONDS` (5), `BENCH_DRAIN_SECONDS` (30), `BENCH_WORKERS` (4 client processes), `BENCH_HEARTBEAT_MS` (15000, the call window\'s period), `BENCH_BCAST_RATE` (5), `BENCH_BCAST_SECONDS` (10), `BENCH_INFLIGHT` (100 connection attempts in flight per client process), `BENCH_PARTS` (`abcd`), `BENCH_CLIENT` (`wire`, or `socket.io-client`), `BENCH_HISTORY` (20 past commands per agent), `BENCH_REDIS_DB` (9), `BENCH_OUT`, `BENCH_TIMEOUT_S` (2400), `BENCH_KEEP_LOGS=1` (keep the log directory of every process), `BENCH_PROFILE=1` (V8 CPU profiles of our nodes, into it), `BENCH_HEAP_SNAPSHOT_DIR` (a heap snapshot of every server with each memory sample). Everything the bench starts is stopped by it, and its scratch database dropped, also on failure or Ctrl-C.',
    '',
  );
  if (main) {
    lines.push(`### Verdicts (full scale, ${main.ran_at.slice(0, 16).replace('T', ' ')} UTC; machine ${pct(main.machine_busy_before_start)} busy before the start)`, '');
    lines.push('| target | wanted | measured | verdict |', '|---|---|---|---|');
    for (const t of verdicts(main)) lines.push(`| ${t.what} | ${t.target} | ${t.value} | ${verdictText(t)} |`);
    lines.push('');
  }
  if (main && check) lines.push(...recheckLines(main, check));
  const why = limits(main, capacity);
  if (why.length) lines.push('### What limits the missed targets', '', ...why, '');
  lines.push(
    '### Topology and method',
    '',
    clientsMethod(ref, stormClients),
    "- **(a)** One API process (`node bin/c2c.js serve --role api --demo`) and two gateway processes (`--role gateway`, each its own `GATEWAY_PORT`) on a scratch PostgreSQL database (created and dropped by the bench) and Redis (keys in database 9; rooms over the sharded adapter, one SSUBSCRIBE per room). Agents are demo-account members in its Sales department, created with the operator function `createMember`; each then gets, over REST, a session, a launch ticket, a paired engine (`simulated: false`) and a ready heartbeat. Every agent is then given `BENCH_HISTORY` (20) past commands and the database is analyzed, as a live database's history and autovacuum would have it: without that, the servers' prepared statements kept the plans PostgreSQL made while `widget_commands` was empty, and in a run at 300 commands/s on 2000 sockets the ack UPDATE scanned the whole growing table (1.6 ms and 143 buffers per call, against 0.08 ms and 14 with the history; `pg_stat_statements`, 2026-11-23). The demo integration's concurrency is raised with `c2c integration policy`, rate limits are scaled (`C2C_RATE_LIMIT_SCALE=10000`), and a token may hold any number of sockets (`C2C_SOCKETS_PER_CREDENTIAL=1000000`: part (b) holds its N sockets on one widget token). Half the sockets are widgets, half engines: agent *i*'s widget connects to gateway *i* mod 2 and its engine to the other, from different client processes, so every command crosses Redis. Engines report ready on connect and heartbeat over the socket every 15 s, as idle call windows do; like the real window (docs/window.md), they send no extra heartbeat for a `focus` whose ack the socket took (a window does for commands that change its mute state or its call). Widgets send `focus` commands (queued for the window, no call needed) on their socket at the total rate, each with a fresh `request_id` carrying its send time; an engine notes when `work` first carries the `command_id` and acks it at once (`ack`). Latency = engine receive − the moment the widget's command was due (the client's schedule, not when its timer got to send it: a client held up on a busy machine would otherwise leave its wait out; since 2026-11-27; `performance.timeOrigin + performance.now()`, same machine), joined on `command_id` through the store's `request_id`, into an HDR histogram. Afterwards the store is audited (`widget_commands`: status, acks, hand-overs). The polling baseline is the mean staleness of a 3,000 ms poll (`LIMITS.pollMs`): 1,500 ms.",
    "- **(b)** Each server, in its own process, holds N sockets in one room and gets the same number of broadcasts of the same WidgetState (the bytes our gateway sends, `42[\"state\",{…}]`): our gateway (a fresh `--role gateway` process; N widget sockets of one agent; each push is a real `availability` command on the API node, whose pusher emits to the agent's room through the sharded Redis adapter — the gateway does what it does in production: receive from Redis, fan out), raw uWebSockets.js (`app.publish` to a topic every socket subscribed to), Socket.IO 4.8 attached to uWS with nothing of ours (`io.attachApp`, no authentication, no snapshot, no Redis adapter; `io.to(room).emit`, which its uWS patch turns into one `app.publish`): the floor of the gateway's own stack, so what lies above it is ours; and Socket.IO 4.8 on `http.createServer()` (`io.to(room).emit`). CPU is `process.cpuUsage()` read inside each server by a preloaded probe (`loadtest/push/probe.ts`, over IPC) from the first push until the clients counted every message; the server's CPU in an equally long quiet window just before (keep-alives, timers) is subtracted (\"net\", the figure judged); \"gross\" keeps it.",
    "- **(c)** Memory per held connection = (RSS with N connections − RSS before) ÷ N, both after a forced full GC (`--expose-gc`), after a warm-up of 50 connections that were closed again. Our gateway's sockets are real: N/2 widgets and N/2 engines of distinct agents, authenticated, in their rooms. The baselines hold plain connections in one room or topic.",
    "- **(d)** Our gateway holding those N sockets is stopped (SIGTERM: every client is told `server_restarting`) and started again on the same port; once it listens, every client reconnects (at most `BENCH_INFLIGHT` attempts in flight per client process, refused attempts retried) and is back when it has its snapshot: `state` for a widget, `work` for an engine. Then every widget's WidgetState version is compared with the store's. Raw uWS: the same clients close and open N fresh WebSockets with the same concurrency; back = open. The Socket.IO baselines: the same with Socket.IO's handshake; back = connected. Baselines run before our gateway, so that by then every engine of (a) is offline and the reaper pushes nothing during (b)–(d).",
    '',
  );
  if (main?.a) lines.push(...partA(main.a, `### (a) Figures, full scale (${main.scale.sockets} sockets, ${main.scale.rate_per_s} commands/s)`));
  if (capacity?.a) lines.push(...partA(capacity.a, `### (a) Figures at ${capacity.scale.sockets} sockets (\`${capacity.command}\`, ${capacity.ran_at.slice(0, 16).replace('T', ' ')} UTC${capacity.ran_at < TIMED_FROM_DUE ? ', latency timed from when each command was sent' : ''})`));
  const c = main?.comparison;
  if (c) {
    lines.push(`### (b), (c), (d) Figures (N = ${c.sockets})`, '');
    lines.push('| server | RSS per connection | heap per connection | CPU per delivered message (net) | of it user | of it kernel | (gross) | delivered | N back (after restart / fresh) |', '|---|---|---|---|---|---|---|---|---|');
    lines.push(
      serverRow('our gateway (uWS + Socket.IO, Redis adapter)', c.gateway),
      serverRow('raw uWebSockets.js', c.uws),
      ...(c.sio_uws ? [serverRow('Socket.IO on uWS, bare (nothing of ours)', c.sio_uws)] : []),
      serverRow('Socket.IO on Node http', c.sio),
      '',
    );
    if (c.gateway.broadcast) lines.push(`Broadcast payload ${c.gateway.broadcast.payload_bytes} B, ${c.gateway.broadcast.pushes} pushes at ${c.gateway.broadcast.rate_per_s}/s to ${c.gateway.broadcast.members} members.`);
    if (c.gateway.memory_one_agent) {
      const one = c.gateway.memory_one_agent;
      lines.push(
        `Our gateway with N widget sockets of one agent (the broadcast room; one widget token, so its cached credential check and agent are held once for all), opened after the (c)/(d) sockets were closed: ${kb(one.heap_per_connection_bytes)} of heap per connection${one.per_connection_bytes * 2 < one.heap_per_connection_bytes ? ` (RSS grew only ${kb(one.per_connection_bytes)}: the process kept the memory it had grown for the previous sockets)` : `, ${kb(one.per_connection_bytes)} RSS`}.`,
      );
    }
    const s = c.gateway.storm;
    if (s) {
      lines.push(
        `Gateway restart: ${s.opened} of ${s.sockets} back in ${s.seconds} s once the new process listened (${s.restart_s} s to stop and start it; ${s.from_restart_s} s from SIGTERM), ${s.retries} attempts retried; snapshots ${JSON.stringify(s.snapshots)}.`,
      );
    }
    lines.push('');
  }
  return lines.join('\n');
}
