/**
 * Engine tokens (c2ce_): one per paired call window. The token stops working when the window
 * closes, a newer window replaces it, the integration or agent is revoked or disabled (on the next
 * request), or after 24 h without a heartbeat.
 *
 * Heartbeats arrive from every window every few seconds, so the checks that read the store are
 * cached per token, the outcome included, for at most a minute; the bus drops an entry at once when
 * its engine closes or is given a new token, or its integration or member changes.
 */
import { C2CError, isRefusal } from '../../../shared/errors.js';
import { LIMITS } from '../../../shared/limits.js';
import type { Bus } from '../../bus/index.js';
import type { Clock } from '../../clock.js';
import { lookupTogether } from '../../store/coalesce.js';
import type { Db } from '../../store/index.js';
import type { ResolvedAgent } from '../agents.js';
import { createBusCache } from '../bus-cache.js';
import type { Directory } from '../directory.js';
import { ownCopy, parseCredential, secretMatches } from '../credentials.js';
import { assertIntegrationUsable, type IntegrationWithAccount } from '../integrations/repo.js';
import type { EngineRow } from '../views.js';

export interface EngineContext {
  /** the engine as of the last store read (up to a minute old): use it for ids, not for state */
  engine: EngineRow;
  integration: IntegrationWithAccount;
  agent: ResolvedAgent;
}

interface CachedEngineAuth {
  engine: EngineRow;
  secretHash: Uint8Array;
  integration: IntegrationWithAccount | undefined;
  outcome: { agent: ResolvedAgent } | { failure: C2CError };
  loadedAt: number;
}

const CACHE_MS = 60_000;

export const CLOSED_WINDOW_MESSAGE = 'This call window was closed or replaced by a newer one.';

export function createEngineAuth(db: Db, bus: Bus, clock: Clock, directory: Directory) {
  const cache = createBusCache<CachedEngineAuth>(
    bus,
    clock,
    (message) => (message.type === 'engine' && message.reason !== 'work') || message.type === 'integration' || message.type === 'member',
    ({ engine }, message) =>
      (message.type === 'engine' && message.reason !== 'work' && engine.id === message.engineId) ||
      (message.type === 'integration' && engine.integration_id === message.integrationId) ||
      (message.type === 'member' && engine.member_id === message.memberId),
  );

  const engineByLookup = lookupTogether<EngineRow & { lookup: string; secret_hash: Uint8Array }>(db, 'SELECT * FROM engines WHERE lookup = ANY($1::text[])', (row) => row.lookup);

  async function load(lookup: string): Promise<CachedEngineAuth | undefined> {
    const row = await engineByLookup(lookup);
    if (!row) return undefined;
    const { secret_hash: stored, ...engine } = row;
    const secretHash = ownCopy(stored);
    const integration = await directory.integration(engine.integration_id);
    let outcome: CachedEngineAuth['outcome'];
    try {
      if (!integration) throw new C2CError('unauthorized');
      assertIntegrationUsable(integration);
      outcome = { agent: await directory.agent(integration, engine.member_id) };
    } catch (error) {
      // A failure of the moment (the database not answering) is thrown, never cached as the token's answer.
      if (!isRefusal(error)) throw error;
      outcome = { failure: error };
    }
    return { engine, secretHash, integration, outcome, loadedAt: clock.now() };
  }

  return async function authenticateEngine(token: string | undefined): Promise<EngineContext> {
    const presented = parseCredential('engineToken', token);
    if (!presented) throw new C2CError('unauthorized', 'An engine token (c2ce_…) is required: in Authorization: Bearer on REST, in auth.token on the socket.');
    const cached = cache.get(presented.lookup);
    const fresh = cached && clock.now() - cached.loadedAt < CACHE_MS ? cached : undefined;
    const entry = fresh ?? (await cache.load(presented.lookup, () => load(presented.lookup)));
    if (!entry || !secretMatches(entry.secretHash, presented)) throw new C2CError('unauthorized');
    if (entry.engine.state === 'closed') throw new C2CError('unauthorized', CLOSED_WINDOW_MESSAGE);
    if (entry.engine.last_seen_at + LIMITS.engineTokenIdleSeconds * 1000 <= clock.now()) {
      throw new C2CError('unauthorized', 'The engine token expired after a day without heartbeats; open the call window again.');
    }
    if ('failure' in entry.outcome) throw entry.outcome.failure;
    return { engine: entry.engine, integration: entry.integration!, agent: entry.outcome.agent };
  };
}
