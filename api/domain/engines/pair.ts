/**
 * Pairing (POST /engine/pair): a call window consumes its launch ticket and becomes the agent's
 * engine. One engine per agent per integration: a second window replaces the first, unless the
 * first is on a call, in which case the second is refused (409 agent_busy) and its ticket stays
 * unused, so it can pair once the call ends.
 */
import { C2CError } from '../../../shared/errors.js';
import { ID_PREFIX } from '../../../shared/prefixes.js';
import type { Clock } from '../../clock.js';
import type { Db } from '../../store/index.js';
import { reloadAgent, type ResolvedAgent } from '../agents.js';
import { Changes } from '../changes.js';
import { LIVE_STATUS_LIST } from '../calls/checks.js';
import { mintCredential, newId } from '../credentials.js';
import { agentLock } from '../locks.js';
import { assertIntegrationUsable, findIntegration, type IntegrationWithAccount } from '../integrations/repo.js';
import { consumeTicket } from '../tickets.js';
import type { EngineRow } from '../views.js';

export interface Pairing {
  token: string;
  engine: EngineRow;
  integration: IntegrationWithAccount;
  agent: ResolvedAgent;
  changes: Changes;
}

export async function pairEngine(db: Db, clock: Clock, input: { ticket: string; simulated: boolean; client: 'window' | 'extension' }): Promise<Pairing> {
  const changes = new Changes();
  const credential = mintCredential('engineToken');
  const result = await db.tx(async (sql) => {
    const ticket = await consumeTicket(sql, clock, input.ticket);
    const integration = await findIntegration(sql, ticket.integration_id);
    if (!integration) throw new C2CError('ticket_invalid');
    assertIntegrationUsable(integration);
    const agent = await reloadAgent(sql, integration, ticket.member_id);
    await sql.query('SELECT pg_advisory_xact_lock(hashtext($1))', [agentLock(integration.id, agent.member.id)]);

    const [previous] = await sql.query<EngineRow>(
      `SELECT * FROM engines WHERE integration_id = $1 AND member_id = $2 AND state <> 'closed'`,
      [integration.id, agent.member.id],
    );
    const now = clock.now();
    if (previous) {
      const [onCall] = await sql.query(`SELECT 1 FROM call_intents WHERE engine_id = $1 AND status IN (${LIVE_STATUS_LIST}) LIMIT 1`, [previous.id]);
      if (onCall) throw new C2CError('agent_busy', 'The agent\'s call window is on a call; a second window cannot replace it now.');
      await sql.query(`UPDATE engines SET state = 'closed', closed_at = $2, close_reason = 'replaced', version = version + 1 WHERE id = $1`, [previous.id, now]);
      changes.engineClosed(previous.id, 'replaced');
    }
    const [engine] = await sql.query<EngineRow>(
      `INSERT INTO engines (id, integration_id, member_id, lookup, secret_hash, client, simulated, created_at, last_seen_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
       RETURNING id, integration_id, member_id, client, simulated, state, mic_ready, available, busy, muted, version, created_at, last_seen_at, closed_at, registered`,
      [newId(ID_PREFIX.engine), integration.id, agent.member.id, credential.lookup, credential.secretHash, input.client, input.simulated, now],
    );
    await changes.touchAgent(sql, integration.id, agent.member.id);
    return { engine: engine!, integration, agent };
  });
  return { token: credential.token, changes, ...result };
}
