/**
 * Incoming calls (spec section 8, "incoming"): the call rings one
 * routable agent, the one whose window is ready, has a microphone, is Available, registered and
 * not on a call, in an enabled integration that allows incoming calls to an enabled, covered
 * member. Of several, the one idle longest rings. Through the simulator (the demo, integrators'
 * CI) or through Twilio (a number's incoming webhook, routes/provider/incoming.ts).
 */
import { C2CError, isRefusal } from '../../../shared/errors.js';
import { LIMITS } from '../../../shared/limits.js';
import { ID_PREFIX } from '../../../shared/prefixes.js';
import type { Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import { loadProviderAccount, type ProviderAccount, type ProviderName, type Providers } from '../../providers/index.js';
import { INBOUND_RING_SECONDS } from '../../providers/provider.js';
import { statusCallbackUrl } from '../../providers/twiml.js';
import type { Db, Sql } from '../../store/index.js';
import { reloadAgent } from '../agents.js';
import { Changes } from '../changes.js';
import { newId } from '../credentials.js';
import { assertIntegrationUsable, findIntegration } from '../integrations/repo.js';
import type { IntegrationRow } from '../integrations/model.js';
import { integrationLock } from '../locks.js';
import { timeLimitSeconds } from '../billing.js';
import { parseE164 } from '../phone.js';
import type { CallRow, EngineRow } from '../views.js';
import { LIVE_STATUS_LIST } from './checks.js';

export interface InboundRequest {
  integrationId: string;
  /** the caller's number; null when the caller withholds it (Twilio) */
  from: string | null;
  /** ring only this member's window */
  memberEmail?: string;
  callerName?: string;
  /** members not to ring: those an earlier ring of the same caller went to (calls/inbound-twilio.ts) */
  passedOver?: readonly string[];
  /** which ring of the caller's leg this is: 1, or the next after an agent let it ring out or declined */
  ringAttempt?: number;
}

export type InboundDeps = { db: Db; clock: Clock; config: Config; providers: Providers };

/**
 * How a provider rings the chosen window: which windows it can ring, and the provider leg the
 * call is recorded with. The simulator places that leg before the call is recorded (and lets it go
 * if the call cannot be); Twilio's is the caller's leg, there already, and the window is rung by
 * the TwiML answered once the call is recorded (routes/provider/incoming.ts).
 */
export interface Ringing {
  provider: ProviderName;
  /** the windows this provider can ring: a real window's Twilio Device never hears the simulator */
  windows: 'any' | 'simulated' | 'real';
  ring(account: ProviderAccount, callId: string, from: string | null, timeLimitSeconds: number): Promise<string>;
  abandon(account: ProviderAccount, legSid: string): Promise<void>;
}

/** An incoming call through the simulator: POST /simulated/inbound-calls, `c2c call inbound`. */
export function injectInbound(deps: InboundDeps, request: InboundRequest): Promise<{ call: CallRow; changes: Changes }> {
  const { simulator } = deps.providers;
  return routeInbound(deps, request, {
    provider: 'simulated',
    // With Twilio configured, real windows listen to Twilio only.
    windows: deps.providers.configured === simulator ? 'any' : 'simulated',
    ring: (account, callId, from, timeLimit) => simulator.ringClient(account, statusCallbackUrl(deps.config.publicBaseUrl, callId), from, timeLimit),
    abandon: async (account, legSid) => void (await simulator.hangup(account, legSid)),
  });
}

/** Records an incoming call on the routable agent idle longest, rung as the provider rings. */
export async function routeInbound(deps: InboundDeps, request: InboundRequest, ringing: Ringing): Promise<{ call: CallRow; changes: Changes }> {
  const { db, clock } = deps;
  const from = request.from === null ? null : parseE164(request.from);
  if (request.from !== null && !from) throw new C2CError('invalid_phone_number', 'from must be a valid E.164 number.');
  const integration = await findIntegration(db, request.integrationId);
  if (!integration) throw new C2CError('not_found', 'No such integration.');
  assertIntegrationUsable(integration);

  // Asked before ringing, so that a call nobody can take rings no leg; asked again, and decided, with
  // the call's insert, under the integration's lock (as POST /calls takes it): two calls arriving
  // together, or a call requested meanwhile, must not give one agent two live calls.
  const first = await chooseAgent(db, integration, request, clock.now(), ringing.windows);
  if (!first) throw new C2CError('agent_offline', 'No agent is available for incoming calls.');
  // Spec section 8: a call's duration is capped by Policy.max_call_seconds, incoming ones too. The
  // provider is told with the ring (Twilio's <Dial><Client timeLimit>), so from the agent chosen
  // first; the call keeps that limit whoever takes it below. (A caller passed on to another agent
  // is a new call, with that agent's: inbound-twilio.ts.)
  const timeLimit = timeLimitSeconds(first.policy.max_call_seconds, Infinity);

  const changes = new Changes();
  const id = newId(ID_PREFIX.callIntent);
  const account = (await loadProviderAccount(db, integration.account_id))!;
  const legSid = await ringing.ring(account, id, from?.e164 ?? null, timeLimit);
  let call: CallRow;
  try {
    call = await db.tx(
      async (sql) => {
        const now = clock.now();
        const chosen = await chooseOpenWindow(sql, integration, request, now, ringing.windows);
        if (!chosen) throw new C2CError('agent_offline', 'No agent is available for incoming calls.');
        const [row] = await sql.query<CallRow>(
          `INSERT INTO call_intents (id, integration_id, account_id, member_id, direction, status, phone_number, display_name,
             department, policy, engine_id, provider, provider_call_sid, created_at, expires_at, time_limit_seconds, ring_attempt)
           VALUES ($1, $2, $3, $4, 'inbound', 'incoming', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING *`,
          [
            id,
            integration.id,
            integration.account_id,
            chosen.engine.member_id,
            from?.e164 ?? null,
            request.callerName ?? null,
            chosen.department,
            JSON.stringify(chosen.policy),
            chosen.engine.id,
            ringing.provider,
            legSid,
            now,
            now + INBOUND_RING_SECONDS * 1000,
            timeLimit,
            request.ringAttempt ?? 1,
          ],
        );
        await changes.touchAgent(sql, integration.id, chosen.engine.member_id);
        changes.nudgeEngine(chosen.engine.id);
        return row!;
      },
      { lock: integrationLock(integration.id) },
    );
  } catch (error) {
    // Taken meanwhile (or the store failed): the caller's leg does not ring on.
    await ringing.abandon(account, legSid).catch(() => {});
    throw error;
  }
  return { call, changes };
}

/**
 * chooseAgent, its window then read FOR SHARE, as a claim reads its own (calls/claim.ts): a pairing
 * replacing that window locks it before it checks the window's calls (engines/pair.ts), so either it
 * committed first, and the window reads closed here (the next routable agent is chosen, the
 * statement seeing that commit), or it waits for this call's insert, and is then refused
 * agent_busy. Without the lock, the call could be recorded on a window closed meanwhile, which
 * never hears of it, and the caller ring out on a window nobody has.
 */
async function chooseOpenWindow(
  sql: Sql,
  integration: IntegrationRow,
  request: InboundRequest,
  now: number,
  windows: Ringing['windows'],
): Promise<Chosen | undefined> {
  // bounded: each window closed meanwhile has left the candidates the next statement reads
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const chosen = await chooseAgent(sql, integration, request, now, windows);
    if (!chosen) return undefined;
    const [open] = await sql.query(`SELECT 1 FROM engines WHERE id = $1 AND state <> 'closed' FOR SHARE`, [chosen.engine.id]);
    if (open) return chosen;
  }
  return undefined;
}

interface Chosen {
  engine: EngineRow;
  policy: CallRow['policy'];
  department: string | null;
}

/**
 * The routable agent that has been idle longest, or undefined when there is none. Idle since the
 * end of the agent's last call (whichever window carried it: a window reloaded after each call
 * must not make its agent the longest idle), or, for an agent who has had none, since the window
 * opened. A window silent for LIMITS.engineStaleSeconds no longer holds calls (orphaned): it is
 * not rung either, or the caller would ring out on a window that crashed or sleeps.
 */
async function chooseAgent(
  sql: Sql,
  integration: IntegrationRow,
  request: InboundRequest,
  now: number,
  windows: Ringing['windows'],
): Promise<Chosen | undefined> {
  const candidates = await sql.query<EngineRow>(
    `SELECT e.* FROM engines e JOIN members m ON m.id = e.member_id
       JOIN integrations i ON i.id = e.integration_id AND i.status = 'active'
       JOIN accounts a ON a.id = i.account_id AND a.status = 'active'
     WHERE e.integration_id = $1 AND e.state = 'ready' AND e.mic_ready AND e.available AND e.registered AND NOT e.busy
       AND e.last_seen_at > $3
       AND NOT EXISTS (SELECT 1 FROM call_intents c WHERE c.integration_id = e.integration_id AND c.member_id = e.member_id AND c.status IN (${LIVE_STATUS_LIST}) AND c.ended_at IS NULL)
       AND ($2::text IS NULL OR lower(m.email) = lower($2))
       AND ($4::text = 'any' OR e.simulated = ($4::text = 'simulated'))
       AND NOT (e.member_id = ANY($5::text[]))
     ORDER BY coalesce(
         (SELECT coalesce(c.ended_at, c.created_at) FROM call_intents c
          WHERE c.integration_id = e.integration_id AND c.member_id = e.member_id ORDER BY c.created_at DESC LIMIT 1),
         e.created_at) ASC, e.created_at ASC`,
    [integration.id, request.memberEmail ?? null, now - LIMITS.engineStaleSeconds * 1000, windows, request.passedOver ?? []],
  );
  for (const engine of candidates) {
    try {
      const agent = await reloadAgent(sql, integration, engine.member_id);
      if (!agent.effective.policy.inbound) continue;
      return { engine, policy: agent.effective.policy, department: agent.member.department_name };
    } catch (error) {
      // disabled or no longer covered: not routable; anything else (the store not answering: a
      // StoreUnavailable is a C2CError too) is not "nobody", and the transaction cannot go on
      if (!isRefusal(error)) throw error;
    }
  }
  return undefined;
}
