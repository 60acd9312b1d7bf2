/**
 * The checks of POST /calls before an intent exists (spec section 4), in the documented order:
 * integration → agent → number → account. The engine checks follow in calls/engine-checks.ts.
 */
import { C2CError } from '../../../shared/errors.js';
import type { CallRequest } from '../../../shared/types.js';
import type { Sql } from '../../store/index.js';
import { resolveAgent, type ResolvedAgent } from '../agents.js';
import { findRate } from '../billing.js';
import { assertIntegrationUsable, type IntegrationWithAccount } from '../integrations/repo.js';
import { parseE164, type ParsedNumber } from '../phone.js';
import { walletAdmits } from './wallet.js';
import { LIMITS } from '../../../shared/limits.js';

/** Everything the intent will freeze, once the request passed the checks. */
export interface CheckedCall {
  agent: ResolvedAgent;
  number: ParsedNumber;
  callerId: string;
  perMinuteMicros: number;
}

/** Statuses of intents that hold a call (or a claim on one) and count against limits. */
export const LIVE_STATUSES = ['queued', 'claimed', 'dialing', 'ringing', 'connected', 'incoming'] as const;
/** The live statuses in which a call window holds the call: all but `queued`. */
export const ON_ENGINE_STATUSES = LIVE_STATUSES.filter((status) => status !== 'queued');

/**
 * The status lists as SQL literals, for `status IN (…)`. Never pass them as a parameter
 * (`status = ANY($2)`): every statement runs on a generic plan (store/pg.ts), which cannot tell
 * that a parameter's statuses match a partial index on live calls, and so reads every call ever
 * made (test/store/query-plans.test.ts).
 */
const sqlList = (values: readonly string[]) => values.map((value) => `'${value}'`).join(', ');
export const LIVE_STATUS_LIST = sqlList(LIVE_STATUSES);
export const ON_ENGINE_STATUS_LIST = sqlList(ON_ENGINE_STATUSES);

/**
 * The first check, made before an Idempotency-Key is looked up (calls/create.ts): a body naming
 * another integration is told so, whether or not its key was used before.
 */
export function checkSameIntegration(integration: IntegrationWithAccount, request: CallRequest): void {
  if (request.integration_id !== integration.id) throw new C2CError('integration_mismatch');
}

/** The checks after checkSameIntegration. */
export async function checkCallRequest(sql: Sql, integration: IntegrationWithAccount, request: CallRequest): Promise<CheckedCall> {
  // integration
  assertIntegrationUsable(integration);

  // agent
  const agent = await resolveAgent(sql, integration, request.agent);
  if (!agent.effective.policy.outbound) throw new C2CError('outbound_not_allowed');

  // number
  const number = parseE164(request.phone_number);
  if (!number) throw new C2CError('invalid_phone_number');
  if (!number.country || !agent.effective.destinationCountries.includes(number.country)) {
    throw new C2CError('destination_not_allowed', `Calls to ${number.country ?? 'this destination'} are not allowed by the integration.`);
  }
  // Toll fraud: a premium-rate number pays its owner for every minute called, at the billing
  // owner's expense, so only an integration the operator allowed them for calls one (the voice
  // provider's own geographic permissions block them by default too).
  if (number.premiumRate && !agent.effective.premiumRateAllowed) {
    throw new C2CError('destination_not_allowed', 'Premium-rate numbers are not allowed by the integration.');
  }
  // Platform-wide (no account) or the account's own; written as the unique index's expression, so
  // that both of its columns find the row (the number alone walked every block of every account).
  const [blocked] = await sql.query(
    "SELECT 1 FROM blocked_numbers WHERE coalesce(account_id, '') IN ('', $2) AND number = $1 LIMIT 1",
    [number.e164, integration.account_id],
  );
  if (blocked) throw new C2CError('destination_blocked');

  // account
  const callerId = agent.effective.callerId;
  if (!callerId) throw new C2CError('no_caller_id');
  const perMinuteMicros = await findRate(sql, number.e164);
  if (perMinuteMicros === null) throw new C2CError('destination_not_allowed', 'No calling rate covers this destination.');
  // The plans the dials will make (calls/wallet.ts), had they been made now.
  if (!(await walletAdmits(sql, integration.account_id, perMinuteMicros, agent.effective.policy.max_call_seconds))) {
    throw new C2CError('insufficient_balance');
  }
  const [concurrent] = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM call_intents WHERE integration_id = $1 AND status IN (${LIVE_STATUS_LIST})`,
    [integration.id],
  );
  if ((concurrent?.n ?? 0) >= integration.concurrency_limit) throw new C2CError('concurrency_limit');

  return { agent, number, callerId, perMinuteMicros };
}
