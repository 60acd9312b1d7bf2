/** The SDK's public types: init options, events and getState(). */
import type { Call, Engine, Policy, WidgetAgent } from './contract.js';
import type { WidgetStateName } from './machine.js';
import type { Position } from './ui/widget.js';

export interface InitOptions {
  /** the integration's public id (c2c_…) */
  integrationId: string;
  /** the integrator's endpoint that creates a widget session (POST, JSON, same-origin cookies) */
  sessionEndpoint: string;
  /** the integrator's endpoint that requests an outgoing call (POST, JSON, same-origin cookies) */
  requestCallEndpoint?: string;
  mode?: 'persistent-window';
  /**
   * where the call window opens; overrides the integration's setting "Call window opens as", which
   * is the default (else 'popup'). 'extension' is not available yet: the window opens as a popup,
   * with a console warning.
   */
  windowMode?: 'popup' | 'tab' | 'extension';
  /** default: the integration's widget default, else 'bottom-right' */
  position?: Position;
  /** 'en' or 'fr'; default: the integration's widget default, else the page's lang, else English */
  language?: string;
  /** extra headers for the two integrator endpoints only (e.g. a CSRF header) */
  headers?: Record<string, string>;
  /** the service's API; default: the SDK script's origin + '/api/v1/click2call' */
  apiBaseUrl?: string;
  /** where the widget is mounted; default document.body (fixed at `position`); another element shows it inline */
  container?: HTMLElement;
  /**
   * the spec's opt-out of the automatic redirect into the frame shell. This version has no frame
   * shell (calls use a popup or tab), so there is nothing to redirect into: accepted and ignored.
   */
  shellRedirect?: boolean;
}

export interface CommandFailure {
  kind: string;
  /** the refusal's code, e.g. control_not_allowed, invalid_state, command_failed (the call window could not carry it out), hangup_uncertain, unreachable */
  error: string;
  message: string;
}

export interface SdkEvents {
  statechange: { state: WidgetStateName; call: Call | null };
  /** the requestCallEndpoint's JSON, as it answered */
  callrequested: unknown;
  detached: undefined;
  commandfailed: CommandFailure;
}

export type SdkEventName = keyof SdkEvents;
export type Listener<E extends SdkEventName> = (payload: SdkEvents[E]) => void;

export interface PublicState {
  state: WidgetStateName;
  engine: Engine | null;
  call: Call | null;
  policy: Policy | null;
  agent: WidgetAgent | null;
  session: { expires_at: number | null };
}

/** requestCall() parameters: forwarded as the JSON body; the backend looks the number up itself. */
export interface CallParams {
  contact_reference?: string;
  display_name?: string;
  display_company?: string;
  metadata?: Record<string, unknown>;
  [key: string]: unknown;
}
