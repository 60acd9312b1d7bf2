/** Resource fixtures for the SDK suites. */
import type { Call, Engine } from '../../sdk/src/contract.js';

/** Server time of the fixtures, in seconds; the browser's clock in the suites is deliberately elsewhere. */
export const T0 = 1_767_000_000;

export const engine = (over: Partial<Engine> = {}): Engine => ({
  id: 'eng_1',
  state: 'ready',
  live: true,
  available: true,
  mic_ready: true,
  busy: false,
  muted: false,
  simulated: true,
  last_seen_ago: 0,
  version: 1,
  client: 'window',
  ...over,
});

export const call = (status: Call['status'], over: Partial<Call> = {}): Call => ({
  request_id: 'ci_1',
  call_id: 'ci_1',
  direction: 'outbound',
  status,
  error: null,
  display: { name: 'Jo Bloggs', company: 'Acme', number: '+44••••••0123', contact_reference: 'crm-42', department: null },
  answered_at: null,
  ended_at: null,
  duration: 0,
  expires_at: T0 + 60,
  server_time: T0,
  orphaned: false,
  ...over,
});
