/** The calls service: what the server-key routes and the widget call on call intents. */
import { C2CError } from '../../../shared/errors.js';
import type { Call, CallRequest } from '../../../shared/types.js';
import type { Bus } from '../../bus/index.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../store/index.js';
import type { IntegrationWithAccount } from '../integrations/repo.js';
import { isTerminal, toCall, type CallRow } from '../views.js';
import { bumpAgentVersion } from '../widget-state.js';
import { createCall } from './create.js';

export interface CallsDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
}

export function createCalls({ db, bus, clock }: CallsDeps) {
  async function find(integrationId: string, callId: string): Promise<CallRow> {
    const [call] = await db.query<CallRow>('SELECT * FROM call_intents WHERE id = $1 AND integration_id = $2', [callId, integrationId]);
    if (!call) throw new C2CError('not_found', 'No call with this id in this integration.');
    return call;
  }

  return {
    async create(integration: IntegrationWithAccount, request: CallRequest, idempotencyKey: string | undefined) {
      const result = await createCall(db, clock, integration, request, idempotencyKey);
      if (result.notify) {
        const { memberId, engineId, version } = result.notify;
        bus.publish({ type: 'agent', integrationId: integration.id, memberId, version });
        bus.publish({ type: 'engine', engineId, reason: 'work' });
      }
      return { view: toCall(result.call, clock.now()), replayed: result.replayed };
    },

    async get(integrationId: string, callId: string): Promise<Call> {
      return toCall(await find(integrationId, callId), clock.now());
    },

    /** A hangup from the backend. Until a provider leg exists, a queued or claimed call is canceled. */
    async hangupByServer(integrationId: string, callId: string): Promise<Call> {
      const call = await find(integrationId, callId);
      if (isTerminal(call.status)) return toCall(call, clock.now());
      const now = clock.now();
      const ended = await db.tx(async (sql) => {
        const [row] = await sql.query<CallRow>(
          `UPDATE call_intents SET status = 'canceled', ended_at = $2, end_reason = 'hangup', hangup_requested_at = $2
           WHERE id = $1 AND status IN ('queued', 'claimed') RETURNING *`,
          [call.id, now],
        );
        if (!row) return undefined;
        const version = await bumpAgentVersion(sql, row.integration_id, row.member_id);
        return { row, version };
      });
      if (!ended) return toCall(await find(integrationId, callId), now);
      bus.publish({ type: 'agent', integrationId, memberId: ended.row.member_id, version: ended.version });
      return toCall(ended.row, now);
    },
  };
}

export type Calls = ReturnType<typeof createCalls>;
