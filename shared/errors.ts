/**
 * The error catalogue (spec section 7): every machine code a client can receive, its HTTP status
 * and a default message. Codes marked `extension` are not in the spec's table; they cover cases
 * the spec needs but does not name (bad credentials, malformed input, unknown ids) and are
 * documented in docs/errors.md. Nothing outside this table ever reaches a client.
 */
export interface ErrorSpec {
  status: number;
  message: string;
  /** true for codes this service adds to the spec's catalogue */
  extension?: true;
}

export const ERROR_CATALOGUE = {
  // Session codes. The spec leaves their statuses open; the choice is documented in the README.
  origin_not_allowed: { status: 403, message: 'This origin is not allowed for the integration.' },
  agent_unknown: { status: 404, message: 'No active member matches the agent identifier.' },
  agent_ambiguous: { status: 409, message: 'The agent identifier matches more than one member.' },
  agent_not_assigned: { status: 403, message: 'The member is not covered by the integration.' },
  agent_disabled: { status: 403, message: 'Calls are disabled for this member.' },
  identifier_mode: {
    status: 422,
    message: "The agent object is missing or malformed, or its type differs from the integration's identifier mode.",
  },
  integration_disabled: { status: 403, message: 'The integration is disabled or revoked.' },
  platform_disabled: { status: 403, message: 'The service is disabled platform-wide.' },

  // Call codes, with the statuses the spec fixes.
  agent_offline: { status: 409, message: 'The agent has no live call window.' },
  agent_not_ready: { status: 409, message: "The agent's call window has no microphone." },
  agent_busy: { status: 409, message: 'The agent is busy on another call.' },
  outbound_not_allowed: { status: 403, message: 'Outgoing calls are not allowed for this agent.' },
  invalid_phone_number: { status: 422, message: 'The phone number is not a valid E.164 number.' },
  destination_not_allowed: { status: 403, message: 'Calls to this destination country are not allowed.' },
  destination_blocked: { status: 403, message: 'The destination is on the do-not-call list.' },
  concurrency_limit: { status: 429, message: "The integration's concurrent call limit is reached." },
  insufficient_balance: { status: 402, message: "The account's balance does not cover a call." },
  no_caller_id: { status: 422, message: 'No caller ID is configured for this integration.' },
  idempotency_conflict: {
    status: 409,
    message: 'This Idempotency-Key was already used with a different request body.',
  },
  rate_limited: { status: 429, message: 'Too many requests; retry after the time in Retry-After.' },
  hangup_uncertain: {
    status: 502,
    message: 'The voice provider could not be reached; the call may still be up. Retry the hangup.',
  },
  unreachable: { status: 502, message: 'The click-to-call service could not be reached.' },

  // Extensions: needed by the contract, not named by it.
  unauthorized: { status: 401, message: 'The credential is missing, unknown, expired or revoked.', extension: true },
  ticket_invalid: {
    status: 401,
    message: 'The launch ticket is unknown, expired or already used. Open the call window again from the widget.',
    extension: true,
  },
  integration_mismatch: {
    status: 403,
    message: 'integration_id does not match the integration of the server key.',
    extension: true,
  },
  control_not_allowed: {
    status: 403,
    message: "The integration's policy does not enable this control.",
    extension: true,
  },
  invalid_state: { status: 409, message: "The command does not fit the call's current state.", extension: true },
  command_failed: { status: 409, message: 'The call window could not carry out the command.', extension: true },
  invalid_request: { status: 422, message: 'The request is malformed.', extension: true },
  not_found: { status: 404, message: 'Not found.', extension: true },
  signature_invalid: { status: 403, message: 'The provider signature is missing or invalid.', extension: true },
  provider_unavailable: {
    status: 503,
    message: 'The voice provider cannot issue a token right now.',
    extension: true,
  },
  service_unavailable: { status: 503, message: 'The service is temporarily unavailable; retry shortly.', extension: true },
  internal_error: { status: 500, message: 'An unexpected error occurred.', extension: true },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export const ERROR_CODES = Object.keys(ERROR_CATALOGUE) as ErrorCode[];

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

  constructor(code: ErrorCode, message?: string, options?: { retryAfter?: number; cause?: unknown }) {
    super(message ?? ERROR_CATALOGUE[code].message, { cause: options?.cause });
    this.name = 'C2CError';
    this.code = code;
    this.status = ERROR_CATALOGUE[code].status;
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
