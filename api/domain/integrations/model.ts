/**
 * The integration model as stored, and the pure rules on it: effective policy (defaults plus a
 * member's overrides) and coverage (does this integration cover this member?).
 */
import { PAGE_LANGUAGE } from '../../../shared/schemas/resources.js';
import type { Control, IdentifierMode, NumberVisibility, Policy, WidgetDefaults, WindowMode } from '../../../shared/types.js';

export type IntegrationStatus = 'active' | 'disabled' | 'revoked';
export type CoverageMode = 'everyone' | 'members' | 'departments';
export type { WindowMode };

export interface IntegrationRow {
  id: string;
  account_id: string;
  name: string;
  status: IntegrationStatus;
  allowed_origins: string[];
  allow_all_origins: boolean;
  identifier_mode: IdentifierMode;
  window_mode: WindowMode;
  outbound: boolean;
  inbound: boolean;
  number_visibility: NumberVisibility;
  controls: Control[];
  widget_defaults: StoredWidgetDefaults;
  max_call_seconds: number;
  caller_id: string | null;
  destination_countries: string[];
  /** premium-rate numbers may be called (off by default: toll fraud) */
  premium_rate_allowed: boolean;
  concurrency_limit: number;
  coverage_mode: CoverageMode;
  coverage_inherit_future: boolean;
  coverage_set_at: number;
  created_at: number;
  revoked_at: number | null;
}

export interface MemberRow {
  id: string;
  account_id: string;
  email: string;
  uuid: string;
  name: string;
  enabled: boolean;
  removed: boolean;
  department_id: string | null;
  department_name: string | null;
  created_at: number;
}

/** What a per-member override may change. */
export interface MemberOverrides {
  calls_enabled?: boolean;
  outbound?: boolean;
  inbound?: boolean;
  number_visibility?: NumberVisibility;
  controls?: Control[];
  max_call_seconds?: number;
  caller_id?: string | null;
}

export interface MemberLink {
  selected: boolean;
  integrator_uuid: string | null;
  overrides: MemberOverrides;
}

/** The policy that applies to one agent, plus the call settings that are not part of Policy. */
export interface EffectivePolicy {
  policy: Policy;
  callerId: string | null;
  destinationCountries: string[];
  premiumRateAllowed: boolean;
  callsEnabled: boolean;
}

/** widget_defaults as stored: nodes of the release with migration 011 wrote null for `page`. */
export type StoredWidgetDefaults = Omit<WidgetDefaults, 'language'> & { language: string | null };

/** The widget defaults as answered: the page's language is always `page`, however it was stored. */
export function widgetDefaults(stored: StoredWidgetDefaults): WidgetDefaults {
  return { position: stored.position, language: stored.language ?? PAGE_LANGUAGE };
}

export function effectivePolicy(integration: IntegrationRow, link: MemberLink | null): EffectivePolicy {
  const o = link?.overrides ?? {};
  return {
    policy: {
      outbound: o.outbound ?? integration.outbound,
      inbound: o.inbound ?? integration.inbound,
      number_visibility: o.number_visibility ?? integration.number_visibility,
      controls: o.controls ?? integration.controls,
      widget: { ...widgetDefaults(integration.widget_defaults), window_mode: integration.window_mode },
      max_call_seconds: Math.min(o.max_call_seconds ?? integration.max_call_seconds, integration.max_call_seconds),
    },
    callerId: o.caller_id !== undefined ? o.caller_id : integration.caller_id,
    destinationCountries: integration.destination_countries,
    premiumRateAllowed: integration.premium_rate_allowed,
    callsEnabled: o.calls_enabled ?? true,
  };
}

/**
 * Coverage (spec section 1, step 6): an explicitly selected member is always covered; otherwise
 * "everyone" or the chosen departments cover a member, and a member who joined after coverage was
 * set is covered only when future members inherit.
 */
export function isCovered(
  integration: IntegrationRow,
  member: MemberRow,
  link: MemberLink | null,
  departmentIds: readonly string[],
): boolean {
  if (link?.selected) return true;
  const inherits = integration.coverage_inherit_future || member.created_at <= integration.coverage_set_at;
  switch (integration.coverage_mode) {
    case 'everyone':
      return inherits;
    case 'departments':
      return member.department_id !== null && departmentIds.includes(member.department_id) && inherits;
    case 'members':
      return false;
  }
}
