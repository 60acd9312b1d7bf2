/**
 * Widget commands (POST /widget/commands, and the socket in the gateway): deduplicated by the
 * client's request_id with a unique constraint, so a replay returns the first result and never
 * runs twice; decided against the agent's call and window; carried out by the server or queued
 * for the window, which gets them by push or heartbeat and acks them.
 */
import { C2CError, isErrorCode } from '../../../shared/errors.js';
import type { Command, CommandResult, CommandStatus } from '../../../shared/types.js';
import type { Bus } from '../../bus/index.js';
import type { Clock } from '../../clock.js';
import type { Providers } from '../../providers/index.js';
import type { Db, Sql } from '../../store/index.js';
import { Changes } from '../changes.js';
import { LIVE_STATUSES } from '../calls/checks.js';
import { hangupCall } from '../calls/hangup.js';
import { toWork, WORK_COLUMNS, workCtes, type WorkColumns } from '../engines/work.js';
import { rooms } from '../push.js';
import type { WidgetContext } from '../sessions.js';
import { callJson, engineJson, type CallRow, type EngineRow } from '../views.js';
import { decideCommand } from './decide.js';

interface CommandRow {
  id: number;
  kind: Command['kind'];
  call_id: string | null;
  digits: string | null;
  available: boolean | null;
  status: CommandStatus;
  first_status: CommandStatus | null;
  refused: string | null;
  error: string | null;
}

export interface CommandsDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
  providers: Providers;
}

function replayResult(row: CommandRow): CommandResult {
  if (row.refused && isErrorCode(row.refused)) throw new C2CError(row.refused, row.error ?? undefined);
  return { ok: true, status: row.first_status ?? row.status, command_id: Number(row.id) };
}

/**
 * In one statement: the command already recorded under this request_id (a replay), the agent's
 * engine (not closed), and the call the command is about (`ref`, else the live one).
 */
async function lookUp(sql: Sql, widget: WidgetContext, command: Command) {
  const [row] = await sql.query<{ seen: CommandRow | null; engine: EngineRow | null; call: CallRow | null }>(
    `SELECT
       (SELECT row_to_json(w) FROM widget_commands w WHERE integration_id = $1 AND member_id = $2 AND request_id = $3) AS seen,
       (SELECT ${engineJson('e')} FROM engines e WHERE integration_id = $1 AND member_id = $2 AND state <> 'closed') AS engine,
       (SELECT ${callJson('c')} FROM call_intents c WHERE integration_id = $1 AND member_id = $2 AND status = ANY($4)
          AND ($5::text IS NULL OR id = $5) ORDER BY created_at DESC LIMIT 1) AS call`,
    [widget.integration.id, widget.agent.member.id, command.request_id, LIVE_STATUSES, command.ref ?? null],
  );
  return row!;
}

interface NewCommand {
  widget: WidgetContext;
  command: Command;
  call: CallRow | null;
  engine: EngineRow | null;
  status: CommandStatus;
  refused: { refuse: string; message: string } | null;
  now: number;
}

/**
 * Records the command, or returns null when a concurrent request with the same request_id did so
 * first. When `handOver`, it is recorded as handed over, and the engine's other commands not handed
 * over yet and its dial requests are handed over in the same statement: the push leaves with no
 * further round trip.
 */
async function record(sql: Sql, c: NewCommand, handOver: boolean): Promise<{ row: CommandRow; work?: WorkColumns } | null> {
  const insert = `INSERT INTO widget_commands (integration_id, member_id, request_id, kind, digits, available, call_id, engine_id,
      status, first_status, refused, error, created_at, deliveries, delivered_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
    ON CONFLICT (integration_id, member_id, request_id) DO NOTHING RETURNING *`;
  const params = [
    c.widget.integration.id,
    c.widget.agent.member.id,
    c.command.request_id,
    c.command.kind,
    c.command.digits ?? null,
    c.command.available ?? null,
    c.call?.id ?? null,
    c.engine?.id ?? null,
    handOver ? 'delivered' : c.status,
    c.status,
    c.refused?.refuse ?? null,
    c.refused?.message ?? null,
    c.now,
    handOver ? 1 : 0,
    handOver ? c.now : null,
  ];
  if (!handOver) {
    const [row] = await sql.query<CommandRow>(insert, params);
    return row ? { row } : null;
  }
  const [result] = await sql.query<{ row: CommandRow | null } & WorkColumns>(
    `WITH inserted AS (${insert}), ${workCtes('$8', '$13::bigint', 'new', 'AND EXISTS (SELECT 1 FROM inserted)')}
     SELECT (SELECT row_to_json(i) FROM inserted i) AS row, ${WORK_COLUMNS}`,
    params,
  );
  const { row, handed, dial } = result!;
  return row ? { row, work: { handed: [...handed, { ...row, deliveries: 1 }], dial } } : null;
}

export function createCommands(deps: CommandsDeps) {
  const { db, bus, clock } = deps;

  async function settle(id: number, status: CommandStatus, refused: string | null, error: string | null) {
    await db.query('UPDATE widget_commands SET status = $2, first_status = $2, refused = $3, error = $4, done_at = $5 WHERE id = $1', [
      id,
      status,
      refused,
      error,
      clock.now(),
    ]);
  }

  const service = {
    async execute(widget: WidgetContext, command: Command): Promise<CommandResult> {
      const { integration, agent } = widget;
      // No transaction and no lock on this path, which every command takes: the read and the write
      // are one statement each. A concurrent request with the same request_id meets the unique
      // constraint and is answered as a replay; a change between the two statements is the same
      // as the command having arrived a moment earlier.
      const { seen, engine, call } = await lookUp(db, widget, command);
      if (seen) return replayResult(seen);
      const decision = decideCommand(command, call, engine, agent.effective.policy.controls);
      const changes = new Changes();
      const now = clock.now();
      const refused = 'refuse' in decision ? decision : null;
      const setsAvailability = 'server' in decision && decision.server === 'availability';
      // Availability is set right here; everything else waits for the server's hangup or the window.
      const status: CommandStatus = refused ? 'failed' : setsAvailability ? 'done' : 'queued';
      const recording: NewCommand = { widget, command, call, engine, status, refused, now };
      // Handed over in the recording statement when a socket may take it.
      const handOver = 'engine' in decision && bus.mayHaveListeners(rooms.engine(engine!.id));
      const recorded = setsAvailability
        ? await db.tx(async (sql) => {
            const done = await record(sql, recording, false);
            if (done) {
              await sql.query('UPDATE engines SET available = $2, version = version + 1 WHERE id = $1', [engine!.id, command.available]);
              await changes.touchAgent(sql, integration.id, agent.member.id);
            }
            return done;
          })
        : await record(db, recording, handOver);
      if (!recorded) return replayResult((await lookUp(db, widget, command)).seen!);
      const { row, work } = recorded;
      if ('engine' in decision) changes.engineWork(engine!.id, work && toWork(work, now, service.onRedelivery));
      changes.publish(bus);
      if ('refuse' in decision) throw new C2CError(decision.refuse, decision.message);
      if ('server' in decision && (decision.server === 'hangup' || decision.server === 'decline')) {
        try {
          const ended = await hangupCall(deps, call!.id, decision.server === 'decline' ? 'declined' : 'hangup');
          ended.changes.publish(bus);
        } catch (error) {
          if (error instanceof C2CError) await settle(row.id, 'failed', error.code, error.message);
          throw error;
        }
        await settle(row.id, 'done', null, null);
        return { ok: true, status: 'done', command_id: Number(row.id) };
      }
      return { ok: true, status: row.first_status ?? row.status, command_id: Number(row.id) };
    },

    /** Called for each command handed over again (no ack came for an earlier hand-over). */
    onRedelivery: undefined as (() => void) | undefined,
  };
  return service;
}

export type Commands = ReturnType<typeof createCommands>;
