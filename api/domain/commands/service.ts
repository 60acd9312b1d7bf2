/**
 * Widget commands (POST /widget/commands, and the socket in the gateway): deduplicated by the
 * client's request_id with a unique constraint, so a replay returns the first result and never
 * runs twice; decided against the agent's call and window; carried out by the server or queued
 * for the window, which gets them by push or heartbeat and acks them.
 */
import { C2CError, isErrorCode, isRefusal } from '../../../shared/errors.js';
import type { Command, CommandResult, CommandStatus } from '../../../shared/types.js';
import type { Bus } from '../../bus/index.js';
import type { Clock } from '../../clock.js';
import type { Providers } from '../../providers/index.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import { hangupCall } from '../calls/hangup.js';
import { toWork } from '../engines/work.js';
import { agentLock } from '../locks.js';
import { rooms } from '../push.js';
import type { WidgetContext } from '../sessions.js';
import type { WidgetStates } from '../widget-states.js';
import { LIVE_STATUSES } from '../calls/checks.js';
import type { CallRow, EngineRow } from '../views.js';
import { decideCommand } from './decide.js';
import { createCommandStore, type CommandRow, type NewCommand } from './store.js';

export interface CommandsDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
  providers: Providers;
  widgetStates: WidgetStates;
}

/**
 * Whether a request_id seen before asks for the command it asked for then. The spec only says the
 * command is not executed again; answering a different one (a hangup sent with a mute's id) with
 * the first one's answer would drop it without a word, so that is refused idempotency_conflict,
 * as POST /calls refuses a replayed Idempotency-Key with a different body.
 */
function sameCommand(row: CommandRow, command: Command): boolean {
  const sameCall = command.ref == null || row.call_id === null || row.call_id === command.ref;
  return row.kind === command.kind && row.digits === (command.digits ?? null) && row.available === (command.available ?? null) && sameCall;
}

function replayResult(row: CommandRow): CommandResult {
  if (row.refused && isErrorCode(row.refused)) throw new C2CError(row.refused, row.error ?? undefined);
  return { ok: true, status: row.first_status ?? row.status, command_id: Number(row.id) };
}

export function createCommands(deps: CommandsDeps) {
  const { db, bus, clock } = deps;
  const store = createCommandStore(db);
  const lookUp = (widget: WidgetContext, command: Command) =>
    store.lookUp({ integrationId: widget.integration.id, memberId: widget.agent.member.id, requestId: command.request_id, ref: command.ref ?? null });

  /**
   * Settles a server-run command, once: a replay racing the first attempt may settle too, and the
   * first to settle decides what every later replay answers. The row as it stands is returned.
   */
  async function settle(id: number, status: CommandStatus, refused: string | null, error: string | null): Promise<CommandRow> {
    const [settled] = await db.query<CommandRow>(
      `UPDATE widget_commands SET status = $2, first_status = $2, refused = $3, error = $4, done_at = $5 WHERE id = $1 AND status = 'queued' RETURNING *`,
      [id, status, refused, error, clock.now()],
    );
    return settled ?? (await db.query<CommandRow>('SELECT * FROM widget_commands WHERE id = $1', [id]))[0]!;
  }

  /**
   * Ends the call of a recorded hangup or decline (the server's commands) and settles the record.
   * A refusal is the command's answer for good. After a failure of the moment (the database not
   * answering) the record stays queued, and a replay runs this again: ending a call that has ended
   * since changes nothing, so the replay answers done, as the first attempt should have. A replay
   * that races a first attempt still running hangs up twice, which the provider's hangup allows.
   */
  async function runHangup(row: CommandRow): Promise<CommandResult> {
    try {
      const ended = await hangupCall(deps, row.call_id!, row.kind === 'decline' ? 'declined' : 'hangup', { byAgent: true });
      ended.changes.publish(bus);
    } catch (error) {
      if (!isRefusal(error)) throw error;
      return replayResult(await settle(row.id, 'failed', error.code, error.message));
    }
    return replayResult(await settle(row.id, 'done', null, null));
  }

  /** A hangup or decline recorded but never settled: its first attempt failed (or is still running). */
  const unsettledHangup = (row: CommandRow) => (row.kind === 'hangup' || row.kind === 'decline') && row.status === 'queued' && row.call_id !== null;
  const answerReplay = (seen: CommandRow, command: Command) => {
    if (!sameCommand(seen, command)) {
      throw new C2CError('idempotency_conflict', `This request_id was used for another command (${seen.kind}); send a new command with a new request_id.`);
    }
    return unsettledHangup(seen) ? runHangup(seen) : replayResult(seen);
  };

  /**
   * The agent's open engine and live call, from the state its widgets are shown: cached per agent
   * and dropped by the bus with every version bump (widget-states.ts), which every change of an
   * engine's state or a call's status makes. A command then costs the store one statement, its
   * recording, which also finds a replay (the request_id's unique constraint). Undefined where the
   * cached state cannot tell: a command naming another call than the cached one (an older call, or
   * a newer one this node has not heard of yet: its widget saw it on another node), a call neither
   * live nor ended. The call is the one the command names, ended or not; else the live one.
   */
  async function situation(widget: WidgetContext, ref: string | null | undefined): Promise<{ engine: EngineRow | null; call: CallRow | null } | undefined> {
    const { engine, call } = await deps.widgetStates.load(widget.integration.id, widget.agent.member.id);
    const open = engine && engine.state !== 'closed' ? engine : null;
    if (ref != null && ref !== call?.id) return undefined;
    // the newest call, ended: the one named, as it is; else none live
    if (!call || call.ended_at !== null) return { engine: open, call: ref != null ? call : null };
    if (!(LIVE_STATUSES as readonly string[]).includes(call.status)) return undefined;
    return { engine: open, call };
  }

  const service = {
    async execute(widget: WidgetContext, command: Command): Promise<CommandResult> {
      const { integration, agent } = widget;
      // No transaction and no lock on this path, which every command takes: it is decided on the
      // agent's state as its widgets are shown it (situation), or read with one statement where that
      // cannot tell, and recorded with one, each shared with the commands that arrive meanwhile
      // (store.ts). A replay, or a concurrent request with the same request_id, meets the unique
      // constraint and is answered from the first record; a change not yet seen when deciding is
      // the same as the command having arrived a moment earlier.
      const known = await situation(widget, command.ref);
      const { seen, engine, call } = known ? { seen: null, ...known } : await lookUp(widget, command);
      if (seen) return answerReplay(seen, command);
      const decision = decideCommand(command, call, engine, agent.effective.policy.controls);
      const changes = new Changes();
      const now = clock.now();
      const refused = 'refuse' in decision ? decision : null;
      const setsAvailability = 'server' in decision && decision.server === 'availability';
      // Availability is set right here, and a call that already ended needs nothing; everything
      // else waits for the server's hangup or the window.
      const status: CommandStatus = refused ? 'failed' : setsAvailability || 'ended' in decision ? 'done' : 'queued';
      // Handed over in the recording statement when a socket may take it.
      const handOver = 'engine' in decision && bus.mayHaveListeners(rooms.engine(engine!.id));
      const recording: NewCommand = {
        integrationId: integration.id,
        memberId: agent.member.id,
        command,
        callId: call?.id ?? null,
        // Only the window's commands name it: a hangup the server is still carrying out must never
        // be handed to the window as work (a heartbeat takes every queued row that names it).
        engineId: 'engine' in decision ? engine!.id : null,
        status,
        refused,
        now,
        handOver,
      };
      // Availability is the agent's, carried by their open window: under the agent's lock, which a
      // pairing holds while it carries the old window's choice over to the new one, it is set on the
      // window open now. Set on the window it was decided on, it could land on one a pairing had
      // just closed, after the pairing copied the old value: the agent's choice lost, though `done`.
      // (With none open, on that window: a reload's pairing carries over the window it closed.)
      const recorded = setsAvailability
        ? await db.tx(
            async (sql) => {
              const done = await store.recordIn(sql, recording);
              if (done) {
                await sql.query(
                  `UPDATE engines SET available = $3, version = version + 1
                   WHERE id = COALESCE((SELECT id FROM engines WHERE integration_id = $1 AND member_id = $2 AND state <> 'closed' ORDER BY created_at DESC LIMIT 1), $4)`,
                  [integration.id, agent.member.id, command.available, engine!.id],
                );
                await changes.touchAgent(sql, integration.id, agent.member.id);
              }
              return done;
            },
            { lock: agentLock(integration.id, agent.member.id) },
          )
        : await store.record(recording);
      if (!recorded) return answerReplay((await lookUp(widget, command)).seen!, command);
      const { row, work } = recorded;
      if ('engine' in decision) changes.engineWork(engine!.id, work && toWork(work, now, service.onRedelivery));
      changes.publish(bus);
      if ('refuse' in decision) throw new C2CError(decision.refuse, decision.message);
      if ('server' in decision && (decision.server === 'hangup' || decision.server === 'decline')) return runHangup(row);
      return { ok: true, status: row.first_status ?? row.status, command_id: Number(row.id) };
    },

    /** Called for each command handed over again (no ack came for an earlier hand-over). */
    onRedelivery: undefined as (() => void) | undefined,
  };
  return service;
}

export type Commands = ReturnType<typeof createCommands>;
