/**
 * Id and credential prefixes. Public ids name a record; credentials are bearer secrets made of
 * prefix + lookup id + secret (see api/domain/credentials.ts), so a leaked log line containing a
 * prefix is easy to grep for and a key can be told apart from a token at a glance.
 */
export const ID_PREFIX = {
  integration: 'c2c_',
  account: 'acc_',
  member: 'mem_',
  department: 'dep_',
  serverKey: 'key_',
  widgetSession: 'ws_',
  launchTicket: 'lt_',
  engine: 'eng_',
  callIntent: 'ci_',
} as const;

export const CREDENTIAL_PREFIX = {
  serverKey: 'c2ck_',
  widgetToken: 'c2cw_',
  engineToken: 'c2ce_',
  /** the spec states no prefix for launch tickets; this one is ours */
  launchTicket: 'c2cl_',
} as const;

export type CredentialKind = keyof typeof CREDENTIAL_PREFIX;

/** The provider identity of an engine (spec section 1): c2c_<engine_id>. */
export function engineIdentity(engineId: string): string {
  return `c2c_${engineId}`;
}

/**
 * The custom parameter an incoming call's TwiML names the call with (`<Parameter>`), which the call
 * window's Twilio Device reads from the ringing call (window/src/drivers/twilio.ts).
 */
export const INCOMING_CALL_PARAMETER = 'intent';
