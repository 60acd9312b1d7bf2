/**
 * The targets of npm run bench:push, judged from the figures; the summary printed at the end; and
 * the "## Push (npm run bench:push)" section of docs/performance.md (only that section is replaced).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { PartAResult } from './part-a.js';
import type { BroadcastFigures, MemoryFigures, StormFigures } from './single-node.js';
import { round } from './stats.js';

export interface ServerResult {
  memory?: MemoryFigures;
  broadcast?: BroadcastFigures;
  storm?: StormFigures;
  /** gateway only: the same N sockets as widgets of one agent (the broadcast room) */
  memory_one_agent?: { per_connection_bytes: number; heap_per_connection_bytes: number };
}

export interface Comparison {
  sockets: number;
  gateway: ServerResult;
  uws: ServerResult;
  /** Socket.IO attached to uWS with nothing of ours (results before 2026-11-23 lack it) */
  sio_uws?: ServerResult;
  sio: ServerResult;
}

export interface Target {
  id: string;
  what: string;
  target: string;
  value: string;
  /** null: not measurable in this run, or (indicative) shown but never judged */
  met: boolean | null;
  indicative?: true;
}

/** A verdict as the reports write it. */
export function verdictText(t: Target): string {
  return t.indicative ? 'not judged' : t.met === null ? 'not measurable' : t.met ? 'met' : '**MISSED**';
}

const KB = 1024;
/** ms below a second, seconds above */
const time = (ms: number) => (ms >= 1000 ? `${round(ms / 1000, 1)} s` : `${ms} ms`);

/**
 * A ratio as shown: two decimals, or four where two would round it onto a round value such as a
 * target's edge. Verdicts are taken on the exact ratio: 1.3001× misses ≤ 1.3×.
 */
const shown = (ratio: number) => {
  const two = round(ratio, 2);
  return Number.isInteger(Math.round(two * 100) / 10) && round(ratio, 4) !== two ? round(ratio, 4) : two;
};

/**
 * polling's mean staleness ÷ the push median (the issue's definition). A poll's staleness is spread
 * evenly over 0..poll_ms, so its median is its mean: this is also median ÷ median.
 */
export const pollRatio = (a: PartAResult) => {
  const value = a.polling_baseline.mean_staleness_ms / a.latency.p50_ms;
  return round(value, value < 1 ? 3 : 1);
};

/** Net user time per message this small (µs) is within what subtracting the idle window resolves (keep-alive pings). */
const resolvable = (userUs: number) => userUs >= 0.05;

/** A CPU-per-message ratio (user + kernel), numerator ÷ denominator. */
function cpuRow(
  id: string,
  what: string,
  target: string,
  numerator: { per_message_us_net: number },
  denominator: { per_message_us_net: number },
  meets: (ratio: number) => boolean,
): Target {
  const ratio = numerator.per_message_us_net / denominator.per_message_us_net;
  return { id, what, target, value: `${numerator.per_message_us_net} µs ÷ ${denominator.per_message_us_net} µs = ${shown(ratio)}×`, met: meets(ratio) };
}

/**
 * A user-space-only ratio, numerator ÷ denominator: shown, never judged. The kernel counts a
 * process's CPU time exactly only in total; getrusage splits it into user and kernel time by
 * sampling over the process's whole life, so over a window of seconds in a process with a long
 * history (the gateway, after parts c and d) the split is unreliable, and a verdict on it could go
 * either way. The user + kernel rows are the verdicts.
 */
function userSpaceRow(
  id: string,
  what: string,
  target: string,
  numerator: { per_message_user_us_net: number },
  denominator: { per_message_user_us_net: number },
  meets: (ratio: number) => boolean,
): Target {
  const [n, d] = [numerator.per_message_user_us_net, denominator.per_message_user_us_net];
  const measurable = resolvable(n) && resolvable(d);
  const ratio = n / d;
  return {
    id,
    what,
    target,
    value: measurable
      ? `${n} µs ÷ ${d} µs = ${shown(ratio)}× (indicative: ${meets(ratio) ? 'within' : 'outside'} the target, not judged)`
      : `${n} µs ÷ ${d} µs: within the idle subtraction's noise`,
    met: null,
    indicative: true,
  };
}

export function judge(a: PartAResult | undefined, c: Comparison | undefined): Target[] {
  const out: Target[] = [];
  if (a) {
    // every socket asked for opened, every command delivered: else the load was lighter than stated
    const complete = a.complete && a.commands.undelivered === 0 && a.sockets.failed === 0;
    out.push({
      id: 'a.p99',
      what: `(a) command → engine p99, 2 gateways over Redis, ${a.sockets.opened} sockets, ${a.rate_per_s}/s`,
      target: '≤ 5 ms',
      value:
        a.latency.count === 0
          ? `none of ${a.commands.sent} commands delivered by the end of the ${a.drain_s} s drain`
          : `p50 ${time(a.latency.p50_ms)}, p99 ${time(a.latency.p99_ms)}${a.commands.undelivered > 0 || !a.complete ? ` (${a.commands.undelivered} of ${a.commands.sent} not delivered within the ${a.drain_s} s drain: lower bounds)` : ''}${a.sockets.failed > 0 ? ` (${a.sockets.failed} sockets never opened: a lighter load than stated)` : ''}`,
      met: a.latency.count > 0 && a.latency.p99_ms <= 5 && complete,
    });
    out.push({
      id: 'a.vs_polling',
      what: '(a) polling mean staleness (poll_ms/2) ÷ push median',
      target: '≥ 100×',
      value:
        a.latency.count === 0
          ? 'no push median: nothing delivered'
          : `${a.polling_baseline.mean_staleness_ms} ms ÷ ${time(a.latency.p50_ms)} = ${pollRatio(a)}×${complete ? '' : ' (the run was not complete: see the row above)'}`,
      met: a.latency.count > 0 && complete && a.polling_baseline.mean_staleness_ms / a.latency.p50_ms >= 100,
    });
    out.push({
      id: 'a.audit',
      what: '(a) store audit: every command done, acked',
      target: 'all done',
      value: `${String(a.audit.commands)} commands, all done: ${String(a.audit.all_done)}`,
      met: a.audit.all_done === true,
    });
  }
  if (c) {
    const g = c.gateway.broadcast;
    const u = c.uws.broadcast;
    const s = c.sio.broadcast;
    if (g && u) {
      // judged only when both delivered all: a server whose clients missed messages spends its CPU on fewer
      const allDelivered = (...runs: Array<{ delivered: number; expected_deliveries: number }>) => runs.every((run) => run.delivered >= run.expected_deliveries);
      out.push(cpuRow('b.vs_uws', '(b) gateway CPU per delivered message ÷ raw uWS app.publish (user + kernel)', '≤ 1.3×', g, u, (ratio) => ratio <= 1.3 && allDelivered(g, u)));
      out.push(userSpaceRow('b.vs_uws_user', "(b) the same, user space only (the servers' own code; the kernel's loopback delivery left out)", '≤ 1.3×', g, u, (ratio) => ratio <= 1.3));
    }
    if (g && s) {
      out.push(cpuRow('b.vs_sio', '(b) Socket.IO on Node http CPU per message ÷ gateway (user + kernel)', '≥ 6×', s, g, (ratio) => ratio >= 6 && [s, g].every((run) => run.delivered >= run.expected_deliveries)));
      out.push(userSpaceRow('b.vs_sio_user', '(b) the same, user space only', '≥ 6×', s, g, (ratio) => ratio >= 6));
    }
    const gm = c.gateway.memory;
    const sm = c.sio.memory;
    if (gm) {
      out.push({
        id: 'c.bytes',
        what: '(c) gateway memory per held connection (RSS)',
        target: '≤ 10 KB (10,240 B)',
        value: `${gm.per_connection_bytes} B (${round(gm.per_connection_bytes / KB, 1)} KB)`,
        met: gm.per_connection_bytes > 0 ? gm.per_connection_bytes <= 10 * KB : null,
      });
    }
    if (gm && sm) {
      // with few sockets, RSS noise can exceed the growth (even make it negative)
      const measurable = sm.per_connection_bytes > 0 && gm.per_connection_bytes > 0;
      const ratio = gm.per_connection_bytes / sm.per_connection_bytes;
      out.push({
        id: 'c.vs_sio',
        what: '(c) gateway ÷ Socket.IO on Node http, memory per connection',
        target: '≤ 0.5×',
        value: measurable ? `${gm.per_connection_bytes} B ÷ ${sm.per_connection_bytes} B = ${shown(ratio)}×` : `${gm.per_connection_bytes} B ÷ ${sm.per_connection_bytes} B: RSS noise at this N`,
        met: measurable ? ratio <= 0.5 : null,
      });
    }
    const gs = c.gateway.storm;
    const us = c.uws.storm;
    if (gs && us) {
      const snaps = gs.snapshots ?? {};
      const allBack = gs.failed === 0 && snaps.widgets_current === snaps.widgets && snaps.engines_with_work === snaps.engines;
      // a baseline that lost connections took longer than a clean one would have: a ratio against it flatters ours
      const baselineClean = us.failed === 0 && us.opened === us.sockets;
      const ratio = gs.seconds / us.seconds;
      out.push({
        id: 'd.storm',
        what: `(d) ${gs.sockets} clients back after a gateway restart ÷ raw uWS accepting ${us.sockets} fresh`,
        target: '≤ 1.5×, all with current snapshots',
        value: `${gs.seconds} s ÷ ${us.seconds} s = ${shown(ratio)}×; ${allBack ? 'all back, snapshots current' : `NOT all back: ${JSON.stringify(snaps)}, failed ${gs.failed}`}${baselineClean ? '' : `; raw uWS opened ${us.opened} of ${us.sockets} (${us.failed} failed): no fair baseline`}`,
        met: ratio <= 1.5 && allBack && baselineClean,
      });
    }
  }
  return out;
}

export function printTable(targets: Target[]): void {
  const widths = [64, 22, 52];
  const line = (cells: string[]) => cells.map((cell, i) => (i < widths.length ? cell.padEnd(widths[i]!) : cell)).join(' ');
  console.log('');
  console.log(line(['target', 'wanted', 'measured', 'verdict']));
  console.log('-'.repeat(150));
  for (const t of targets) console.log(line([t.what, t.target, t.value, verdictText(t).replaceAll('*', '')]));
}

const SECTION = '## Push (npm run bench:push)';

/** Replaces (or appends) one `## …` section of docs/performance.md (the push bench's unless another heading is given), leaving the others alone. */
export function writeDocsSection(file: string, body: string, heading = SECTION): void {
  const section = `${heading}\n\n${body.trim()}\n`;
  if (!existsSync(file)) {
    writeFileSync(file, `# Performance\n\nBenchmarks are separate commands (\`npm run bench:*\`), never timed assertions in tests. Each measures against a baseline run side by side in the same run, and writes JSON under \`loadtest/results/\`.\n\n${section}`);
    return;
  }
  const text = readFileSync(file, 'utf8');
  const start = text.indexOf(heading);
  if (start === -1) {
    writeFileSync(file, `${text.trimEnd()}\n\n${section}`);
    return;
  }
  const rest = text.slice(start + heading.length);
  const next = rest.search(/\n## /);
  const after = next === -1 ? '' : rest.slice(next + 1);
  writeFileSync(file, `${text.slice(0, start)}${section}${after ? `\n${after}` : ''}`);
}
