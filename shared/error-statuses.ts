/**
 * The HTTP status of every code of the error catalogue (spec section 7), apart from the messages,
 * so that the browser bundles (SDK, call window) classify a socket's refusal exactly as REST
 * answers it (SdkError.status and ApiError.status, and with them what is retried) without carrying
 * the catalogue's text. The catalogue (shared/errors.ts) takes its statuses from here.
 */
export const ERROR_STATUS = {
  // Session codes. The spec leaves their statuses open; the choice is documented in the README.
  origin_not_allowed: 403,
  agent_unknown: 404,
  agent_ambiguous: 409,
  agent_not_assigned: 403,
  agent_disabled: 403,
  identifier_mode: 422,
  integration_disabled: 403,
  platform_disabled: 403,
  // Call codes, with the statuses the spec fixes.
  agent_offline: 409,
  agent_not_ready: 409,
  agent_busy: 409,
  outbound_not_allowed: 403,
  invalid_phone_number: 422,
  destination_not_allowed: 403,
  destination_blocked: 403,
  concurrency_limit: 429,
  insufficient_balance: 402,
  no_caller_id: 422,
  idempotency_conflict: 409,
  rate_limited: 429,
  hangup_uncertain: 502,
  unreachable: 502,
  // Extensions: needed by the contract, not named by it.
  unauthorized: 401,
  ticket_invalid: 401,
  integration_mismatch: 403,
  control_not_allowed: 403,
  invalid_state: 409,
  command_failed: 409,
  invalid_request: 422,
  not_found: 404,
  signature_invalid: 403,
  provider_unavailable: 503,
  service_unavailable: 503,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/**
 * The status REST answers a code with. A code this build does not know (a newer server's) counts
 * as the service failing: retried like a 500, which a command's request_id makes safe.
 */
export function statusOf(code: string): number {
  return Object.hasOwn(ERROR_STATUS, code) ? ERROR_STATUS[code as ErrorCode] : 500;
}
