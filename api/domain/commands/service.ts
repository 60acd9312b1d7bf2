/**
 * Widget commands (POST /widget/commands, and the socket in the gateway): deduplicated by the
 * client's request_id with a unique constraint, so a replay returns the first result and never
 * runs twice; decided against the agent's call and window; carried out by the server or queued
 * for the window, which gets them by push or heartbeat and acks them.
 */
import { C2CError, isErrorCode } from '../../../shared/errors.js';
import type { Command, CommandResult, CommandStatus } from '../../../shared/types.js';
import type { EngineCommand } from '../../../shared/schemas/engine-api.js';
import type { Bus } from '../../bus/index.js';
import type { Clock } from '../../clock.js';
import type { Providers } from '../../providers/index.js';
import type { Db, Sql } from '../../store/index.js';
import { Changes } from '../changes.js';
import { LIVE_STATUSES } from '../calls/checks.js';
import { hangupCall } from '../calls/hangup.js';
import { handOverWork } from '../engines/work.js';
import { rooms } from '../push.js';
import type { WidgetContext } from '../sessions.js';
import type { CallRow, EngineRow } from '../views.js';
import { decideCommand, type Decision } from './decide.js';

type Step = { replay: CommandRow } | { row: CommandRow; decision: Decision; call: CallRow | null };

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

/** The agent's engine (not closed) and the call a command is about: `ref`, else the live one. */
async function target(sql: Sql, widget: WidgetContext, ref: string | undefined) {
  const { integration, agent } = widget;
  const [engine] = await sql.query<EngineRow>(`SELECT * FROM engines WHERE integration_id = $1 AND member_id = $2 AND state <> 'closed'`, [
    integration.id,
    agent.member.id,
  ]);
  const [call] = ref
    ? await sql.query<CallRow>('SELECT * FROM call_intents WHERE id = $1 AND integration_id = $2 AND member_id = $3 AND status = ANY($4)', [
        ref,
        integration.id,
        agent.member.id,
        LIVE_STATUSES,
      ])
    : await sql.query<CallRow>(
        'SELECT * FROM call_intents WHERE integration_id = $1 AND member_id = $2 AND status = ANY($3) ORDER BY created_at DESC LIMIT 1',
        [integration.id, agent.member.id, LIVE_STATUSES],
      );
  return { engine: engine ?? null, call: call ?? null };
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
      const changes = new Changes();
      const { integration, agent } = widget;
      const step = await db.tx(async (sql): Promise<Step> => {
        await sql.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`agent:${integration.id}:${agent.member.id}`]);
        const [seen] = await sql.query<CommandRow>(
          'SELECT * FROM widget_commands WHERE integration_id = $1 AND member_id = $2 AND request_id = $3',
          [integration.id, agent.member.id, command.request_id],
        );
        if (seen) return { replay: seen };
        const { engine, call } = await target(sql, widget, command.ref);
        const decision = decideCommand(command, call, engine, agent.effective.policy.controls);
        // Availability is set right here; everything else waits for the server's hangup or the window.
        const status: CommandStatus = 'server' in decision && decision.server === 'availability' ? 'done' : 'queued';
        const [row] = await sql.query<CommandRow>(
          `INSERT INTO widget_commands (integration_id, member_id, request_id, kind, digits, available, call_id, engine_id,
             status, first_status, refused, error, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12) RETURNING *`,
          [
            integration.id,
            agent.member.id,
            command.request_id,
            command.kind,
            command.digits ?? null,
            command.available ?? null,
            call?.id ?? null,
            engine?.id ?? null,
            'refuse' in decision ? 'failed' : status,
            'refuse' in decision ? decision.refuse : null,
            'refuse' in decision ? decision.message : null,
            clock.now(),
          ],
        );
        // Handed over in this transaction when a socket may take it: the push leaves on commit.
        if ('engine' in decision) {
          const live = bus.mayHaveListeners(rooms.engine(engine!.id));
          changes.engineWork(engine!.id, live ? await handOverWork(sql, service, engine!.id, clock.now()) : undefined);
        }
        if ('server' in decision && decision.server === 'availability') {
          await sql.query('UPDATE engines SET available = $2, version = version + 1 WHERE id = $1', [engine!.id, command.available]);
          await changes.touchAgent(sql, integration.id, agent.member.id);
        }
        return { row: row!, decision, call };
      });
      if ('replay' in step) return replayResult(step.replay);
      changes.publish(bus);
      const { row, decision, call } = step;
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
      return { ok: true, status: row.status, command_id: Number(row.id) };
    },

    /** Called for each command handed over again (no ack came for an earlier hand-over). */
    onRedelivery: undefined as (() => void) | undefined,

    /** Commands the engine has not acked yet; each hand-over is counted (deliveries). */
    async pendingFor(sql: Sql, engineId: string): Promise<EngineCommand[]> {
      const rows = await sql.query<CommandRow>(
        `UPDATE widget_commands SET status = CASE WHEN status = 'queued' THEN 'delivered' ELSE status END,
           deliveries = deliveries + 1, delivered_at = coalesce(delivered_at, $2)
         WHERE engine_id = $1 AND status IN ('queued', 'delivered') AND refused IS NULL RETURNING *`,
        [engineId, clock.now()],
      );
      for (const row of rows) if ((row as CommandRow & { deliveries: number }).deliveries > 1) this.onRedelivery?.();
      return rows
        .sort((a, b) => Number(a.id) - Number(b.id))
        .map((row) => ({ command_id: Number(row.id), kind: row.kind, call_id: row.call_id, digits: row.digits, available: row.available, ref: row.call_id }));
    },
  };
  return service;
}

export type Commands = ReturnType<typeof createCommands>;
