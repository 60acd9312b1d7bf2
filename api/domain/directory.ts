/**
 * Integrations and resolved agents as the hot paths read them (widget and engine credential
 * checks, state pushes): one shared copy per integration and per agent, not one per token, and no
 * store reads while nothing changed. The bus drops an integration when it (or its account)
 * changes, and an agent when its member or integration does: the same events that already end a
 * cached credential check.
 */
import { C2CError } from '../../shared/errors.js';
import type { Bus } from '../bus/index.js';
import { coalesce, lookupTogether } from '../store/coalesce.js';
import type { Db } from '../store/index.js';
import { reloadAgents, type ResolvedAgent } from './agents.js';
import type { Clock } from '../clock.js';
import { createBusCache } from './bus-cache.js';
import { INTEGRATION_SELECT, type IntegrationWithAccount } from './integrations/repo.js';

interface CachedAgent {
  integrationId: string;
  agent: ResolvedAgent;
}

export function createDirectory(db: Db, bus: Bus, clock: Clock) {
  const integrations = createBusCache<IntegrationWithAccount>(
    bus,
    clock,
    (message) => message.type === 'integration',
    (integration, message) => message.type === 'integration' && integration.id === message.integrationId,
  );
  const agents = createBusCache<CachedAgent>(
    bus,
    clock,
    (message) => message.type === 'integration' || message.type === 'member',
    ({ integrationId, agent }, message) =>
      (message.type === 'integration' && integrationId === message.integrationId) || (message.type === 'member' && agent.member.id === message.memberId),
  );

  // Integrations and agents checked by a busy node (the clients of a reconnect storm, every request
  // while the bus is down) share a statement.
  const integrationTogether = lookupTogether<IntegrationWithAccount>(db, `${INTEGRATION_SELECT} WHERE i.id = ANY($1::text[])`, (row) => row.id);
  const reloadTogether = coalesce((wanted: Array<{ integration: IntegrationWithAccount; memberId: string }>) => reloadAgents(db, wanted), { isolate: true });

  /** A cached integration is as the store has it since the last change announced (bus-cache.ts): read only where none is. */
  const integrationNow = async (id: string): Promise<IntegrationWithAccount | undefined> => integrations.get(id) ?? integrations.load(id, () => integrationTogether(id));

  return {
    integration: integrationNow,

    /** The member as an agent of this integration; throws the refusal (agent_disabled, …), which is not cached. */
    async agent(integration: IntegrationWithAccount, memberId: string): Promise<ResolvedAgent> {
      const key = `${integration.id}:${memberId}`;
      const load = async () => {
        // Resolved against the integration as it is now (cached, or read), not the caller's copy: that
        // may have been read before an operator's change whose message came in before this load
        // began (a read the integrations' cache would not keep, but hands its caller once), and
        // this load, passing its own guard, would keep that old policy or coverage for a minute.
        const current = (await integrationNow(integration.id)) ?? integration;
        const agent = await reloadTogether({ integration: current, memberId });
        if (agent instanceof C2CError) throw agent;
        return { integrationId: integration.id, agent };
      };
      return (agents.get(key) ?? (await agents.load(key, load))).agent;
    },
  };
}

export type Directory = ReturnType<typeof createDirectory>;
