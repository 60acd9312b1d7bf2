/**
 * The engine heartbeat (POST /engine/heartbeat, and the socket's heartbeat event): the window's
 * state report in; pending commands, dial requests and its call out. It also reconciles which
 * calls the window really holds: a live call it does not report is flagged orphaned (after a short
 * grace, since a claim may still be in flight), and un-flagged when it reports it again.
 */
import { C2CError } from '../../../shared/errors.js';
import { LIMITS } from '../../../shared/limits.js';
import type { DialRequest, EngineCommand, HeartbeatRequest } from '../../../shared/schemas/engine-api.js';
import type { Clock } from '../../clock.js';
import { batchRows } from '../../store/batch-rows.js';
import { coalesce } from '../../store/coalesce.js';
import { isStoreOutOfReach } from '../../store/db.js';
import type { Db } from '../../store/index.js';
import { agentVersionBump } from '../agent-state.js';
import { Changes } from '../changes.js';
import { LIVE_STATUSES, ON_ENGINE_STATUS_LIST } from '../calls/checks.js';
import type { Commands } from '../commands/service.js';
import { callJson, engineJson, type CallRow, type EngineRow } from '../views.js';
import { ackParams, ackUpdate, firstAcks, type AckedRow, type FirstAck } from './acks.js';
import { CLOSED_WINDOW_MESSAGE, type EngineContext } from './auth.js';
import { toWork, WORK_COLUMNS, workByEngine, workCtes, type EnginesWorkColumns, type WorkColumns } from './work.js';

export interface HeartbeatResult {
  engine: EngineRow;
  commands: EngineCommand[];
  dialRequests: DialRequest[];
  call: CallRow | null;
  firstAcks: FirstAck[];
  changes: Changes;
}

/**
 * How a heartbeat came. Over the socket, a command pushed moments ago may have its ack on the way,
 * so only those overdue are handed over again. A window heartbeats over REST when its socket is down
 * (or not yet up, or did not answer its last heartbeat): a push may have gone to no one (while Redis
 * is up a command counts as pushed wherever the window is), so every unacked command is handed over.
 * The window carries out each command_id once, so one that did arrive costs a repeated delivery only.
 */
export type HeartbeatVia = 'socket' | 'rest';

/** One engine's report, as the batch statement takes it. */
interface Report {
  engineId: string;
  state: 'ready' | 'enabling';
  report: HeartbeatRequest;
  via: HeartbeatVia;
}

/** What the batch statement returns for one engine. */
interface Reported extends WorkColumns {
  /** the batch's time */
  at: number;
  engine: (EngineRow & { changed: boolean }) | null;
  version: number | null;
  acked: AckedRow[];
  /** its live calls, then its latest (`latest`), so it also learns how a call ended */
  calls: Array<CallRow & { latest: boolean }>;
}

/**
 * The reports of many engines in one statement: each engine's row updated (its version bumped, and
 * its agent's, when what widgets show changed), acks applied, work handed over, and each engine's
 * live calls and its latest read. Nothing happens for an engine that is closed. Compared with the
 * row as it is now, not the caller's copy, which may be cached and old. Rows are locked in id
 * order, so batches of several nodes never deadlock, and FOR NO KEY UPDATE, so a command or a
 * call recorded for the engine meanwhile (whose foreign key check shares the row) does not wait.
 */
const report = (input: string) => `WITH input AS (
    SELECT id, state, mic_ready, busy, muted, registered FROM ${input}
  ), before AS (
    SELECT id, state, mic_ready, busy, muted FROM engines WHERE id IN (SELECT id FROM input) AND state <> 'closed' ORDER BY id FOR NO KEY UPDATE
  ), engine AS (
    UPDATE engines e SET state = i.state, mic_ready = i.mic_ready, busy = i.busy, muted = i.muted, last_seen_at = $7,
      registered = coalesce(i.registered, e.registered),
      version = e.version + CASE WHEN (b.state, b.mic_ready, b.busy, b.muted) IS DISTINCT FROM (i.state, i.mic_ready, i.busy, i.muted) THEN 1 ELSE 0 END
    FROM before b JOIN input i ON i.id = b.id WHERE e.id = b.id
    RETURNING e.*, (b.state, b.mic_ready, b.busy, b.muted) IS DISTINCT FROM (i.state, i.mic_ready, i.busy, i.muted) AS changed
  ), bumped AS (
    ${agentVersionBump('SELECT DISTINCT integration_id, member_id FROM engine WHERE changed')}
  ), acked AS (
    ${ackUpdate('unnest($8::text[], $9::bigint[], $10::text[], $11::text[]) AS a(engine_id, id, result, error)', '$7::bigint', 'AND c.engine_id IN (SELECT id FROM engine)')}
  ), ${workCtes('SELECT id FROM engine', '$7::bigint', 'due', 'AND NOT EXISTS (SELECT 1 FROM unnest($8::text[], $9::bigint[]) AS x(engine_id, id) WHERE x.engine_id = widget_commands.engine_id AND x.id = widget_commands.id)', 'SELECT unnest($12::text[])')},
  calls AS (
    SELECT c.*, false AS latest FROM call_intents c WHERE c.engine_id IN (SELECT id FROM engine) AND c.status IN (${ON_ENGINE_STATUS_LIST})
    UNION ALL
    SELECT l.*, true AS latest FROM engine CROSS JOIN LATERAL (
      SELECT * FROM call_intents WHERE engine_id = engine.id ORDER BY created_at DESC LIMIT 1) l
  )
  SELECT (SELECT coalesce(json_agg(${engineJson('engine')}), '[]') FROM engine) AS engines,
    (SELECT coalesce(json_agg(bumped), '[]') FROM bumped) AS bumped,
    (SELECT coalesce(json_agg(acked), '[]') FROM acked) AS acked, ${WORK_COLUMNS},
    (SELECT coalesce(json_agg(${callJson('calls')}), '[]') FROM calls) AS calls`;
/** The statement's two texts (store/batch-rows.ts): one report, a VALUES row, and several. */
const REPORTS = new Map<string, string>();
function reportText(input: string): string {
  let text = REPORTS.get(input);
  if (!text) REPORTS.set(input, (text = report(input)));
  return text;
}

interface ReportRows extends EnginesWorkColumns {
  engines: Array<EngineRow & { changed: boolean }>;
  bumped: Array<{ integration_id: string; member_id: string; version: number }>;
  acked: Array<AckedRow & { engine_id: string }>;
  calls: Array<CallRow & { latest: boolean }>;
}

/** Runs one batch of reports of distinct engines. */
async function reportAll(db: Db, reports: Report[], at: number): Promise<Reported[]> {
  const input = batchRows('i', [
    ['id', 'text', reports.map((r) => r.engineId)],
    ['state', 'text', reports.map((r) => r.state)],
    ['mic_ready', 'boolean', reports.map((r) => r.report.mic_ready)],
    ['busy', 'boolean', reports.map((r) => r.report.busy)],
    ['muted', 'boolean', reports.map((r) => r.report.muted)],
    // null (a window of an earlier release says nothing): the voice token's fetch stands
    ['registered', 'boolean', reports.map((r) => r.report.registered ?? null)],
  ]);
  const [rows] = await db.query<ReportRows>(reportText(input.from), [
    ...input.params,
    at,
    ...ackParams(reports.map((r) => ({ engineId: r.engineId, acks: r.report.acks }))),
    // $12: the engines whose report came over REST, handed every unacked command (HeartbeatVia)
    reports.filter((r) => r.via === 'rest').map((r) => r.engineId),
  ]);
  const { engines, bumped, acked, calls } = rows!;
  const work = workByEngine(rows!);
  const engineById = new Map(engines.map((engine) => [engine.id, engine]));
  const versions = new Map(bumped.map((b) => [`${b.integration_id}:${b.member_id}`, b.version]));
  const ackedBy = groupBy(acked, (row) => row.engine_id);
  const callsBy = groupBy(calls, (call) => call.engine_id ?? '');
  return reports.map(({ engineId }) => {
    const engine = engineById.get(engineId) ?? null;
    return {
      at,
      engine,
      version: engine?.changed ? (versions.get(`${engine.integration_id}:${engine.member_id}`) ?? null) : null,
      acked: ackedBy.get(engineId) ?? [],
      ...(work.get(engineId) ?? { handed: [], dial: [] }),
      calls: callsBy.get(engineId) ?? [],
    };
  });
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.get(key(item))?.push(item) ?? groups.set(key(item), [item]);
  return groups;
}

/** One report's outcome in its batch: a report that committed is never run again for a later round's failure. */
type Outcome = { reported: Reported } | { failed: unknown };

/**
 * Reports of a busy node go to the store together (store/coalesce.ts). Two reports of the same
 * engine never share a statement: the later one goes in a later round, in order.
 *
 * Each round commits on its own, so a round that fails must not fail, or run again, the rounds
 * before it: run again, a report's acks would no longer be first acks (what follows a first ack,
 * a failure told to the widget or a simulated answer, would never happen) and its commands would be
 * handed over twice. A round of several that fails is tried report by report, so that one bad
 * report (a row lock its statement timed out on) fails only its own caller. Only when nothing has
 * committed yet does a store out of reach fail the whole batch (and, in coalesce, the reports
 * queued behind it) at once.
 */
function reportTogether(db: Db, clock: Clock) {
  const together = coalesce<Report, Outcome>(async (reports) => {
    // an engine's k-th report of the batch goes in round k
    const rounds: Array<Array<{ report: Report; index: number }>> = [];
    const reportsOf = new Map<string, number>();
    reports.forEach((report, index) => {
      const round = reportsOf.get(report.engineId) ?? 0;
      reportsOf.set(report.engineId, round + 1);
      (rounds[round] ??= []).push({ report, index });
    });
    const outcomes: Outcome[] = new Array(reports.length);
    let committed = false;
    let outOfReach: unknown;
    for (const round of rounds) {
      if (outOfReach !== undefined) {
        for (const entry of round) outcomes[entry.index] = { failed: outOfReach };
        continue;
      }
      try {
        const done = await reportAll(db, round.map((entry) => entry.report), clock.now());
        round.forEach((entry, i) => (outcomes[entry.index] = { reported: done[i]! }));
        committed = true;
      } catch (error) {
        if (isStoreOutOfReach(error)) {
          if (!committed) throw error;
          outOfReach = error;
          for (const entry of round) outcomes[entry.index] = { failed: error };
        } else if (round.length === 1) {
          outcomes[round[0]!.index] = { failed: error };
        } else {
          for (const entry of round) {
            if (outOfReach !== undefined) {
              outcomes[entry.index] = { failed: outOfReach };
              continue;
            }
            try {
              const [alone] = await reportAll(db, [entry.report], clock.now());
              outcomes[entry.index] = { reported: alone! };
              committed = true;
            } catch (failure) {
              if (isStoreOutOfReach(failure)) outOfReach = failure;
              outcomes[entry.index] = { failed: failure };
            }
          }
        }
      }
    }
    return outcomes;
  });
  return async (report: Report): Promise<Reported> => {
    const outcome = await together(report);
    if ('failed' in outcome) throw outcome.failed;
    return outcome.reported;
  };
}

/**
 * Reconciles the engine's live calls with the one the report says it holds, flagging or clearing
 * `orphaned`, and returns the call the window is told about: its live call, else its latest, so
 * it also learns how a call ended. The report read both; a flag that changes is written here.
 *
 * The report has committed by then (its acks recorded, its commands handed over): a failure to
 * write a flag is logged and the heartbeat answered, with the flags as they are stored. Failed,
 * the window would send the same report again, and its acks would no longer be first acks.
 * The next heartbeat writes the flag.
 */
async function reconcileCalls(
  db: Db,
  changes: Changes,
  rows: Array<CallRow & { latest: boolean }>,
  heldCallId: string | null,
  at: number,
  log?: (message: string, error?: unknown) => void,
): Promise<CallRow | null> {
  const isLive = (call: CallRow) => (LIVE_STATUSES as readonly string[]).includes(call.status);
  const live = rows.filter((call, index) => isLive(call) && rows.findIndex((other) => other.id === call.id) === index);
  const flips = live.filter((call) => {
    const since = call.claimed_at ?? call.created_at;
    const orphaned = heldCallId !== call.id && at - since > LIMITS.orphanGraceSeconds * 1000;
    return orphaned !== call.orphaned;
  });
  if (flips.length > 0) {
    try {
      const touched = new Changes();
      await db.tx(async (sql) => {
        for (const call of flips) {
          // Only while the call is still live and not flagged so already: one that ended since the
          // report read it keeps its flag, and its agent's version is not bumped for nothing.
          // When the window let go of it (the reaper reads the provider's record 30 s on); a call
          // held again starts over, its record's reads included.
          const [changed] = await sql.query(
            `UPDATE call_intents SET orphaned = $2, orphaned_at = CASE WHEN $2 THEN $3::bigint END, provider_read_at = CASE WHEN $2 THEN provider_read_at END
             WHERE id = $1 AND ended_at IS NULL AND orphaned <> $2 RETURNING id`,
            [call.id, !call.orphaned, at],
          );
          if (changed) await touched.touchAgent(sql, call.integration_id, call.member_id);
        }
      });
      for (const call of flips) call.orphaned = !call.orphaned;
      changes.merge(touched);
    } catch (error) {
      log?.('flagging the calls a heartbeat did not report failed; the next heartbeat flags them', error);
    }
  }
  const newestLive = live.sort((a, b) => b.created_at - a.created_at)[0];
  return newestLive ?? rows.find((call) => call.latest) ?? null;
}

/** The heartbeat of the engine service: one engine's report, in a statement shared with the reports arriving meanwhile. */
export function createHeartbeats(deps: { db: Db; clock: Clock; commands: Commands; log?: (message: string, error?: unknown) => void }) {
  const report = reportTogether(deps.db, deps.clock);
  return async function engineHeartbeat(context: EngineContext, request: HeartbeatRequest, via: HeartbeatVia): Promise<HeartbeatResult> {
    const changes = new Changes();
    const state = request.state === 'ready' && request.mic_ready ? 'ready' : 'enabling';
    const row = await report({ engineId: context.engine.id, state, report: request, via });
    const { engine, version, acked, calls } = row;
    // Closed in the store (replaced, closed, revoked) while its token's cached check, up to a minute
    // old, still passed: refused as that check will be, so the window stops now rather than report
    // itself ready to a service that no longer routes to it.
    if (!engine) throw new C2CError('unauthorized', CLOSED_WINDOW_MESSAGE);
    if (version !== null) changes.agentTouched(engine.integration_id, engine.member_id, version);
    const { at } = row;
    const call = await reconcileCalls(deps.db, changes, calls, request.call_id, at, deps.log);
    const work = toWork(row, at, () => deps.commands.onRedelivery?.());
    return { engine, commands: work.commands, dialRequests: work.dial_requests, call, firstAcks: firstAcks(acked), changes };
  };
}
