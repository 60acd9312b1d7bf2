/**
 * Engine tokens (c2ce_): one per paired call window. The token stops working when the window
 * closes, a newer window replaces it, the integration or agent is revoked or disabled (on the next
 * request), or after 24 h without a heartbeat.
 */
import { C2CError } from '../../../shared/errors.js';
import { LIMITS } from '../../../shared/limits.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../store/index.js';
import { reloadAgent, type ResolvedAgent } from '../agents.js';
import { parseCredential, secretMatches } from '../credentials.js';
import { assertIntegrationUsable, findIntegration, type IntegrationWithAccount } from '../integrations/repo.js';
import type { EngineRow } from '../views.js';

export interface EngineContext {
  engine: EngineRow;
  integration: IntegrationWithAccount;
  agent: ResolvedAgent;
}

export async function authenticateEngine(db: Db, clock: Clock, token: string | undefined): Promise<EngineContext> {
  const presented = parseCredential('engineToken', token);
  if (!presented) throw new C2CError('unauthorized', 'An engine token (Authorization: Bearer c2ce_…) is required.');
  const [engine] = await db.query<EngineRow & { secret_hash: Uint8Array }>('SELECT * FROM engines WHERE lookup = $1', [presented.lookup]);
  if (!engine || !secretMatches(engine.secret_hash, presented)) throw new C2CError('unauthorized');
  if (engine.state === 'closed') throw new C2CError('unauthorized', 'This call window was closed or replaced by a newer one.');
  if (engine.last_seen_at + LIMITS.engineTokenIdleSeconds * 1000 <= clock.now()) {
    throw new C2CError('unauthorized', 'The engine token expired after a day without heartbeats; open the call window again.');
  }
  const integration = await findIntegration(db, engine.integration_id);
  if (!integration) throw new C2CError('unauthorized');
  assertIntegrationUsable(integration);
  const agent = await reloadAgent(db, integration, engine.member_id);
  const { secret_hash: _hash, ...row } = engine;
  return { engine: row, integration, agent };
}
