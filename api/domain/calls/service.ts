/** The calls service: what the server-key routes call on call intents. */
import { C2CError } from '../../../shared/errors.js';
import type { Call, CallRequest } from '../../../shared/types.js';
import type { Bus } from '../../bus/index.js';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import type { Providers } from '../../providers/index.js';
import type { Db } from '../../store/index.js';
import type { IntegrationWithAccount } from '../integrations/repo.js';
import { toCall, type CallRow } from '../views.js';
import { createCall } from './create.js';
import { hangupCall } from './hangup.js';
import { injectInbound, type InboundRequest } from './inbound.js';

export interface CallsDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
  config: Config;
  providers: Providers;
}

export function createCalls(deps: CallsDeps) {
  const { db, bus, clock } = deps;

  async function find(integrationId: string, callId: string): Promise<CallRow> {
    const [call] = await db.query<CallRow>('SELECT * FROM call_intents WHERE id = $1 AND integration_id = $2', [callId, integrationId]);
    if (!call) throw new C2CError('not_found', 'No call with this id in this integration.');
    return call;
  }

  return {
    async create(integration: IntegrationWithAccount, request: CallRequest, idempotencyKey: string | undefined) {
      const result = await createCall(db, clock, integration, request, idempotencyKey);
      result.changes.publish(bus);
      return { view: toCall(result.call, clock.now()), replayed: result.replayed };
    },

    async get(integrationId: string, callId: string): Promise<Call> {
      return toCall(await find(integrationId, callId), clock.now());
    },

    /** POST /calls/{id}/hangup: ends the call through the provider; 502 hangup_uncertain when unreachable. */
    async hangupByServer(integrationId: string, callId: string): Promise<Call> {
      const call = await find(integrationId, callId);
      const ended = await hangupCall(deps, call.id, 'hangup');
      ended.changes.publish(bus);
      return toCall(ended.call, clock.now());
    },

    /** A simulated incoming call (demo mode, integrators' CI). */
    async injectInbound(request: InboundRequest): Promise<Call> {
      const { call, changes } = await injectInbound(deps, request);
      changes.publish(bus);
      return toCall(call, clock.now());
    },
  };
}

export type Calls = ReturnType<typeof createCalls>;
