/**
 * Agents checked together (api/domain/agents.ts reloadAgents, used by the directory when many
 * clients arrive at once): one statement for members of several integrations, on both drivers,
 * and each member gets its own agent or its own refusal, in the order asked.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { reloadAgents } from '../../api/domain/agents.js';
import { findIntegration, type IntegrationWithAccount } from '../../api/domain/integrations/repo.js';
import { C2CError } from '../../shared/errors.js';
import { storeDrivers } from '../helpers/env.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('agents checked together on %s', (driver) => {
  let h: Harness;
  let acme: Tenant;
  let other: Tenant;
  let acmeIntegration: IntegrationWithAccount;
  let otherIntegration: IntegrationWithAccount;

  beforeAll(async () => {
    h = await createHarness(driver);
    acme = await seedTenant(h.services);
    other = await seedTenant(h.services);
    acmeIntegration = (await findIntegration(h.services.db, acme.integrationId))!;
    otherIntegration = (await findIntegration(h.services.db, other.integrationId))!;
  });
  afterAll(() => h.close());

  it('gives each member its agent or its refusal, in order, across integrations, from one statement', async () => {
    const statements = vi.spyOn(h.services.db, 'query');
    const results = await reloadAgents(h.services.db, [
      { integration: acmeIntegration, memberId: acme.agent.id },
      { integration: acmeIntegration, memberId: acme.disabled.id },
      { integration: otherIntegration, memberId: other.agent.id },
      { integration: acmeIntegration, memberId: acme.outside.id },
      // a member of another account is no agent of this integration: the credential does not stand
      { integration: acmeIntegration, memberId: other.agent.id },
      { integration: otherIntegration, memberId: 'mem_nobody' },
    ]);
    expect(statements).toHaveBeenCalledTimes(1);
    statements.mockRestore();
    expect(results.map((r) => (r instanceof C2CError ? r.code : r.member.email))).toEqual([
      acme.agent.email,
      'agent_disabled',
      other.agent.email,
      'agent_not_assigned',
      'unauthorized',
      'unauthorized',
    ]);
    const first = results[0] as Exclude<(typeof results)[number], C2CError>;
    expect(first.member).not.toHaveProperty('link');
    expect(first.effective.policy.controls).toEqual(['mute', 'dtmf']);
  });
});
