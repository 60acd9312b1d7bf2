/**
 * The providers a node talks to: the configured one for real engines, and the simulator, which
 * always exists because simulated engines (tests, demos, integrators' CI) use it whatever the
 * configuration says. A call records which one carries it.
 */
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Sql } from '../store/index.js';
import type { ProviderAccount, ProviderName, VoiceProvider } from './provider.js';
import { Simulator } from './simulated/simulator.js';
import { TwilioProvider } from './twilio/twilio.js';

export type { HangupOutcome, ProviderAccount, ProviderName, VoiceProvider } from './provider.js';
export { ProviderUnavailable, ProviderUnreachable } from './provider.js';

export interface Providers {
  simulator: Simulator;
  /** the provider of real (non-simulated) engines */
  configured: VoiceProvider;
  /** The provider that carries a call (call_intents.provider), whatever this node's configuration says. */
  byName(name: ProviderName): VoiceProvider;
}

export function createProviders(config: Config, clock: Clock): Providers {
  const simulator = new Simulator(clock, config.publicBaseUrl);
  // Built on every node: a call Twilio carries is ended and read at Twilio even by a node started
  // VOICE_PROVIDER=simulated (a rollback, a fleet half way through a change). Handed to the
  // simulator instead, its hangup found no leg and answered success while Twilio kept the caller
  // on the line. It needs nothing of the configuration but where Twilio is: credentials are each
  // account's.
  const twilio = new TwilioProvider(clock, { apiBaseUrl: config.twilioApiBaseUrl, timeoutMs: config.twilioTimeoutMs });
  const configured: VoiceProvider = config.voiceProvider === 'twilio' ? twilio : simulator;
  return {
    simulator,
    configured,
    byName: (name) => (name === 'simulated' ? simulator : twilio),
  };
}

interface AccountCredentialsRow {
  id: string;
  provider_account_sid: string;
  provider_auth_token: string;
  provider_api_key_sid: string | null;
  provider_api_key_secret: string | null;
  provider_twiml_app_sid: string | null;
}

export async function loadProviderAccount(sql: Sql, accountId: string): Promise<ProviderAccount | undefined> {
  const [row] = await sql.query<AccountCredentialsRow>(
    `SELECT id, provider_account_sid, provider_auth_token, provider_api_key_sid, provider_api_key_secret, provider_twiml_app_sid
       FROM accounts WHERE id = $1`,
    [accountId],
  );
  return (
    row && {
      accountId: row.id,
      accountSid: row.provider_account_sid,
      authToken: row.provider_auth_token,
      apiKey: row.provider_api_key_sid && row.provider_api_key_secret ? { sid: row.provider_api_key_sid, secret: row.provider_api_key_secret } : null,
      twimlAppSid: row.provider_twiml_app_sid,
    }
  );
}
