/**
 * The error catalogue (spec section 7): every machine code a client can receive, its HTTP status
 * (shared/error-statuses.ts) and a default message. Codes marked `extension` are not in the
 * spec's table; they cover cases the spec needs but does not name (bad credentials, malformed
 * input, unknown ids) and are documented in docs/errors.md. Nothing outside this table ever
 * reaches a client.
 */
import { ERROR_STATUS, type ErrorCode } from './error-statuses.js';

export interface ErrorSpec {
  status: number;
  message: string;
  /** true for codes this service adds to the spec's catalogue */
  extension?: true;
}

/** What each code says, and whether this service added it; its status is in ERROR_STATUS. */
const DETAILS = {
  // Session codes.
  origin_not_allowed: { message: 'This origin is not allowed for the integration.' },
  agent_unknown: { message: 'No active member matches the agent identifier.' },
  agent_ambiguous: { message: 'The agent identifier matches more than one member.' },
  agent_not_assigned: { message: 'The member is not covered by the integration.' },
  agent_disabled: { message: 'Calls are disabled for this member.' },
  identifier_mode: { message: "The agent object is missing or malformed, or its type differs from the integration's identifier mode." },
  integration_disabled: { message: 'The integration is disabled or revoked.' },
  platform_disabled: { message: 'The service is disabled platform-wide.' },

  // Call codes.
  agent_offline: { message: 'The agent has no live call window.' },
  agent_not_ready: { message: "The agent's call window has no microphone." },
  agent_busy: { message: 'The agent is busy on another call.' },
  outbound_not_allowed: { message: 'Outgoing calls are not allowed for this agent.' },
  invalid_phone_number: { message: 'The phone number is not a valid E.164 number.' },
  destination_not_allowed: { message: 'Calls to this destination country are not allowed.' },
  destination_blocked: { message: 'The destination is on the do-not-call list.' },
  concurrency_limit: { message: "The integration's concurrent call limit is reached." },
  insufficient_balance: { message: "The account's balance does not cover a call." },
  no_caller_id: { message: 'No caller ID is configured for this integration.' },
  idempotency_conflict: { message: 'This Idempotency-Key was already used with a different request body.' },
  rate_limited: { message: 'Too many requests; retry after the time in Retry-After.' },
  hangup_uncertain: { message: 'The voice provider could not be reached; the call may still be up. Retry the hangup.' },
  unreachable: { message: 'The click-to-call service could not be reached.' },

  // Extensions: needed by the contract, not named by it.
  unauthorized: { message: 'The credential is missing, unknown, expired or revoked.', extension: true },
  ticket_invalid: { message: 'The launch ticket is unknown, expired or already used. Open the call window again from the widget.', extension: true },
  integration_mismatch: { message: 'integration_id does not match the integration of the server key.', extension: true },
  control_not_allowed: { message: "The integration's policy does not enable this control.", extension: true },
  invalid_state: { message: "The command does not fit the call's current state.", extension: true },
  command_failed: { message: 'The call window could not carry out the command.', extension: true },
  invalid_request: { message: 'The request is malformed.', extension: true },
  not_found: { message: 'Not found.', extension: true },
  signature_invalid: { message: 'The provider signature is missing or invalid.', extension: true },
  provider_unavailable: { message: 'The voice provider cannot issue a token right now.', extension: true },
  service_unavailable: { message: 'The service is temporarily unavailable; retry shortly.', extension: true },
  internal_error: { message: 'An unexpected error occurred.', extension: true },
} as const satisfies Record<ErrorCode, Omit<ErrorSpec, 'status'>>;

export const ERROR_CATALOGUE = Object.fromEntries(
  (Object.keys(ERROR_STATUS) as ErrorCode[]).map((code) => [code, { status: ERROR_STATUS[code], ...DETAILS[code] }]),
) as Record<ErrorCode, ErrorSpec>;

export type { ErrorCode };

export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/** The spec's error envelope. */
export interface ErrorEnvelope {
  ok: false;
  error: ErrorCode;
  message: string;
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CATALOGUE, value);
}

/** The one error class every layer throws; the API renders it as the envelope. */
export class C2CError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** seconds, for rate_limited */
  readonly retryAfter?: number;

  /** `status`: HTTP's own word for this refusal where it has one the code's does not say (413 for a body too large) */
  constructor(code: ErrorCode, message?: string, options?: { retryAfter?: number; cause?: unknown; status?: number }) {
    super(message ?? ERROR_CATALOGUE[code].message, { cause: options?.cause });
    this.name = 'C2CError';
    this.code = code;
    this.status = options?.status ?? ERROR_CATALOGUE[code].status;
    if (options?.retryAfter !== undefined) this.retryAfter = options.retryAfter;
  }

  toJSON(): ErrorEnvelope {
    return { ok: false, error: this.code, message: this.message };
  }
}

/**
 * A C2CError that answers this request for good (unauthorized, agent_disabled, …), as opposed to
 * the service failing for now (service_unavailable, internal_error). Only a refusal may be cached
 * or recorded against a request_id: a replay after a failure must try again.
 */
export function isRefusal(error: unknown): error is C2CError {
  return error instanceof C2CError && error.code !== 'service_unavailable' && error.code !== 'internal_error';
}
