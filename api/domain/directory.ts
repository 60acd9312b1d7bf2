/**
 * Integrations and resolved agents as the hot paths read them (widget and engine credential
 * checks, state pushes): one shared copy per integration and per agent, not one per token, and no
 * store reads while nothing changed. The bus drops an integration when it (or its account)
 * changes, and an agent when its member or integration does: the same events that already end a
 * cached credential check.
 */
import type { Bus } from '../bus/index.js';
import type { Db } from '../store/index.js';
import { reloadAgent, type ResolvedAgent } from './agents.js';
import { createBusCache } from './bus-cache.js';
import { findIntegration, type IntegrationWithAccount } from './integrations/repo.js';

interface CachedAgent {
  integrationId: string;
  agent: ResolvedAgent;
}

export function createDirectory(db: Db, bus: Bus) {
  const integrations = createBusCache<IntegrationWithAccount>(
    bus,
    (message) => message.type === 'integration',
    (integration, message) => message.type === 'integration' && integration.id === message.integrationId,
  );
  const agents = createBusCache<CachedAgent>(
    bus,
    (message) => message.type === 'integration' || message.type === 'member',
    ({ integrationId, agent }, message) =>
      (message.type === 'integration' && integrationId === message.integrationId) || (message.type === 'member' && agent.member.id === message.memberId),
  );

  return {
    async integration(id: string): Promise<IntegrationWithAccount | undefined> {
      return integrations.get(id) ?? integrations.load(id, () => findIntegration(db, id));
    },

    /** The member as an agent of this integration; throws the refusal (agent_disabled, …), which is not cached. */
    async agent(integration: IntegrationWithAccount, memberId: string): Promise<ResolvedAgent> {
      const key = `${integration.id}:${memberId}`;
      const cached = agents.get(key) ?? (await agents.load(key, async () => ({ integrationId: integration.id, agent: await reloadAgent(db, integration, memberId) })));
      return cached.agent;
    },
  };
}

export type Directory = ReturnType<typeof createDirectory>;
