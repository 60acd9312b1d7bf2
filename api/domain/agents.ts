/**
 * Agent resolution (spec section 1): an identifier selects an existing, enabled member that the
 * integration covers, and never creates one. Checks run in this order, each with its code:
 * identifier_mode → agent_unknown / agent_ambiguous → agent_not_assigned → agent_disabled.
 */
import { C2CError } from '../../shared/errors.js';
import type { AgentRef } from '../../shared/types.js';
import type { Sql } from '../store/index.js';
import {
  effectivePolicy,
  isCovered,
  type EffectivePolicy,
  type IntegrationRow,
  type MemberLink,
  type MemberRow,
} from './integrations/model.js';

export interface ResolvedAgent {
  member: MemberRow;
  link: MemberLink | null;
  effective: EffectivePolicy;
  /** how the integrator names this member: the e-mail, or in uuid mode its mapped or stable UUID */
  identifier: string;
}

const MEMBER_COLUMNS = `m.id, m.account_id, m.email, m.uuid::text AS uuid, m.name, m.enabled, m.removed,
  m.department_id, d.name AS department_name, m.created_at`;

/** Finds the member an identifier names and checks coverage and enablement. */
export async function resolveAgent(sql: Sql, integration: IntegrationRow, agent: AgentRef): Promise<ResolvedAgent> {
  if (agent.type !== integration.identifier_mode) {
    throw new C2CError('identifier_mode', `This integration identifies agents by ${integration.identifier_mode}, not ${agent.type}.`);
  }
  const value = agent.value.trim();
  const candidates =
    agent.type === 'email'
      ? await sql.query<MemberRow>(
          `SELECT ${MEMBER_COLUMNS} FROM members m LEFT JOIN departments d ON d.id = m.department_id
           WHERE m.account_id = $1 AND lower(m.email) = lower($2) AND NOT m.removed`,
          [integration.account_id, value],
        )
      : await sql.query<MemberRow>(
          `SELECT ${MEMBER_COLUMNS} FROM members m LEFT JOIN departments d ON d.id = m.department_id
           WHERE m.account_id = $1 AND NOT m.removed AND (
             m.uuid::text = lower($2)
             OR m.id IN (SELECT member_id FROM integration_members
                         WHERE integration_id = $3 AND lower(integrator_uuid) = lower($2)))`,
          [integration.account_id, value, integration.id],
        );
  if (candidates.length === 0) throw new C2CError('agent_unknown');
  if (candidates.length > 1) throw new C2CError('agent_ambiguous');
  return checkAgent(sql, integration, candidates[0]!);
}

/** Re-checks a known member (widget and engine requests): coverage and enablement apply on the next request. */
export async function reloadAgent(sql: Sql, integration: IntegrationRow, memberId: string): Promise<ResolvedAgent> {
  const [member] = await sql.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM members m LEFT JOIN departments d ON d.id = m.department_id
     WHERE m.id = $1 AND m.account_id = $2 AND NOT m.removed`,
    [memberId, integration.account_id],
  );
  if (!member) throw new C2CError('agent_unknown');
  return checkAgent(sql, integration, member);
}

async function checkAgent(sql: Sql, integration: IntegrationRow, member: MemberRow): Promise<ResolvedAgent> {
  const [link] = await sql.query<MemberLink>(
    'SELECT selected, integrator_uuid, overrides FROM integration_members WHERE integration_id = $1 AND member_id = $2',
    [integration.id, member.id],
  );
  const departmentIds =
    integration.coverage_mode === 'departments'
      ? (
          await sql.query<{ department_id: string }>(
            'SELECT department_id FROM integration_departments WHERE integration_id = $1',
            [integration.id],
          )
        ).map((row) => row.department_id)
      : [];
  if (!isCovered(integration, member, link ?? null, departmentIds)) throw new C2CError('agent_not_assigned');
  const effective = effectivePolicy(integration, link ?? null);
  if (!member.enabled || !effective.callsEnabled) throw new C2CError('agent_disabled');
  const identifier = integration.identifier_mode === 'email' ? member.email : (link?.integrator_uuid ?? member.uuid);
  return { member, link: link ?? null, effective, identifier };
}
