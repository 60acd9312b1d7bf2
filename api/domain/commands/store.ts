/**
 * The statements of a widget command, batched per node: the write that records it (with the
 * engine's hand-over), and the read (replay, engine, call) where the agent's cached state cannot
 * decide it (commands/service.ts). The commands that arrive while the
 * previous statement runs go to the store together (api/store/coalesce.ts). An idle node pays no
 * wait; a busy one (a call centre's widgets all sending at once) makes one round trip for many
 * commands instead of one each, which is what PostgreSQL and the node's event loop spend most on.
 */
import type { Command, CommandStatus } from '../../../shared/types.js';
import { batchRows } from '../../store/batch-rows.js';
import { coalesce } from '../../store/coalesce.js';
import type { Db, Sql } from '../../store/index.js';
import { LIVE_STATUS_LIST } from '../calls/checks.js';
import { WORK_COLUMNS, workByEngine, workCtes, type EnginesWorkColumns, type WorkColumns } from '../engines/work.js';
import { callJson, engineJson, type CallRow, type EngineRow } from '../views.js';

export interface CommandRow {
  id: number;
  engine_id: string | null;
  kind: Command['kind'];
  call_id: string | null;
  digits: string | null;
  available: boolean | null;
  status: CommandStatus;
  first_status: CommandStatus | null;
  refused: string | null;
  error: string | null;
}

export interface LookUpKey {
  integrationId: string;
  memberId: string;
  requestId: string;
  /** the call the command names, else the agent's live call is looked up */
  ref: string | null;
}

/** The command already recorded under the request_id (a replay), the agent's engine (not closed), the call. */
export interface LookedUp {
  seen: CommandRow | null;
  engine: EngineRow | null;
  /** the agent's call the command names (live or ended), else the agent's live call */
  call: CallRow | null;
}

const lookUpStatement = (from: string) => `SELECT
    (SELECT row_to_json(w) FROM widget_commands w
      WHERE w.integration_id = i.integration_id AND w.member_id = i.member_id AND w.request_id = i.request_id) AS seen,
    (SELECT ${engineJson('e')} FROM engines e
      WHERE e.integration_id = i.integration_id AND e.member_id = i.member_id AND e.state <> 'closed') AS engine,
    CASE WHEN i.ref IS NULL THEN
      (SELECT ${callJson('c')} FROM call_intents c
        WHERE c.integration_id = i.integration_id AND c.member_id = i.member_id AND c.status IN (${LIVE_STATUS_LIST}) AND c.ended_at IS NULL
        ORDER BY c.created_at DESC LIMIT 1)
    ELSE
      (SELECT ${callJson('c')} FROM call_intents c
        WHERE c.id = i.ref AND c.integration_id = i.integration_id AND c.member_id = i.member_id)
    END AS call
  FROM ${from}
  ORDER BY i.n`;

export interface NewCommand {
  integrationId: string;
  memberId: string;
  command: Command;
  callId: string | null;
  engineId: string | null;
  status: CommandStatus;
  refused: { refuse: string; message: string } | null;
  now: number;
  /** recorded as handed over, with the engine's other new work, for a push that leaves at once */
  handOver: boolean;
}

/** A recorded command and, when handed over, what its push carries; null when the request_id was taken. */
export type Recorded = { row: CommandRow; work?: WorkColumns } | null;

const COLUMNS = `integration_id, member_id, request_id, kind, digits, available, call_id, engine_id,
  status, first_status, refused, error, created_at, deliveries, delivered_at`;

/**
 * Inserts the batch (a request_id already taken, by another batch or earlier in this one, inserts
 * nothing) and, for the engines of the rows recorded as handed over, hands over their other new
 * commands and their dial requests in the same statement.
 */
const RECORD = `WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[], $8::text[],
      $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::integer[], $15::bigint[]) WITH ORDINALITY
      AS i(${COLUMNS}, n)
  ), inserted AS (
    INSERT INTO widget_commands (${COLUMNS}) SELECT ${COLUMNS} FROM input ORDER BY n
    ON CONFLICT (integration_id, member_id, request_id) DO NOTHING RETURNING *
  ), ${workCtes('SELECT engine_id FROM inserted WHERE deliveries = 1', '$16::bigint', 'new')}
  SELECT (SELECT coalesce(json_agg(row_to_json(i)), '[]') FROM inserted i) AS rows, ${WORK_COLUMNS}`;

const keyOf = (integrationId: string, memberId: string, requestId: string) => `${integrationId}\u0000${memberId}\u0000${requestId}`;

export function createCommandStore(db: Db) {
  const lookUp = coalesce<LookUpKey, LookedUp>(
    (keys) => {
      const rows = batchRows('i', [
        ['integration_id', 'text', keys.map((k) => k.integrationId)],
        ['member_id', 'text', keys.map((k) => k.memberId)],
        ['request_id', 'text', keys.map((k) => k.requestId)],
        ['ref', 'text', keys.map((k) => k.ref)],
      ]);
      return db.query<LookedUp>(lookUpStatement(rows.from), rows.params);
    },
    { isolate: true },
  );

  /** Records commands in one statement: through `sql`, a transaction's connection or the pool. */
  async function recordAll(sql: Sql, batch: NewCommand[]): Promise<Recorded[]> {
    const column = <T>(pick: (c: NewCommand) => T) => batch.map(pick);
    const [result] = await sql.query<{ rows: Array<CommandRow & { integration_id: string; member_id: string; request_id: string }> } & EnginesWorkColumns>(RECORD, [
      column((c) => c.integrationId),
      column((c) => c.memberId),
      column((c) => c.command.request_id),
      column((c) => c.command.kind),
      column((c) => c.command.digits ?? null),
      column((c) => c.command.available ?? null),
      column((c) => c.callId),
      column((c) => c.engineId),
      column((c) => (c.handOver ? 'delivered' : c.status)),
      column((c) => c.status),
      column((c) => c.refused?.refuse ?? null),
      column((c) => c.refused?.message ?? null),
      column((c) => c.now),
      column((c) => (c.handOver ? 1 : 0)),
      column((c) => (c.handOver ? c.now : null)),
      Math.max(...batch.map((c) => c.now)),
    ]);
    const rows = new Map(result!.rows.map((row) => [keyOf(row.integration_id, row.member_id, row.request_id), row]));
    const work = workByEngine(result!);
    return batch.map((c): Recorded => {
      const key = keyOf(c.integrationId, c.memberId, c.command.request_id);
      const row = rows.get(key);
      // the first of the batch with this request_id recorded it; a later one is a replay
      if (!row) return null;
      rows.delete(key);
      if (!c.handOver) return { row };
      // The engine's other new work rides with the first of its commands in the batch.
      const engineWork = work.get(c.engineId!) ?? { handed: [], dial: [] };
      work.set(c.engineId!, { handed: [], dial: [] });
      return { row, work: { handed: [...engineWork.handed, { ...row, deliveries: 1 }], dial: engineWork.dial } };
    });
  }

  return {
    lookUp,
    /** Records a command, batched with the others arriving meanwhile. */
    record: coalesce<NewCommand, Recorded>((batch) => recordAll(db, batch), { isolate: true }),
    /** Records a command inside a transaction (alone). */
    async recordIn(sql: Sql, command: NewCommand): Promise<Recorded> {
      return (await recordAll(sql, [command]))[0]!;
    },
  };
}

export type CommandStore = ReturnType<typeof createCommandStore>;
