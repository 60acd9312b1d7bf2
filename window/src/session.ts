/**
 * Pairing: a window opened from the widget carries a launch ticket and pairs with it; the pair
 * answer (engine token included) is kept in sessionStorage, which belongs to this tab only and
 * survives a reload but not the tab, and never in the URL. A window without a ticket continues
 * with a stored pairing if a heartbeat still accepts its token.
 */
import { ApiError, type EngineApi, type HeartbeatResponse, type Paired } from './api.js';
import { MESSAGES, refusalMessage } from './messages.js';

export const STORAGE_KEY = 'c2c.window.pairing';

export type Established =
  | { ok: true; paired: Paired; first: HeartbeatResponse | null }
  | { ok: false; reason: 'no_ticket' | 'ticket_invalid' | 'agent_busy' | 'refused' | 'unreachable' | 'declined'; message: string; retry: boolean };

interface Stored {
  apiBaseUrl: string;
  paired: Paired;
}

/** The pairing stored for this API, or null. */
export function loadPairing(storage: Storage | null, apiBaseUrl: string): Paired | null {
  try {
    const stored = JSON.parse(storage?.getItem(STORAGE_KEY) ?? 'null') as Stored | null;
    if (stored?.apiBaseUrl !== apiBaseUrl || typeof stored.paired?.engine_token !== 'string') return null;
    return stored.paired;
  } catch {
    return null;
  }
}

export function savePairing(storage: Storage | null, apiBaseUrl: string, paired: Paired): void {
  try {
    storage?.setItem(STORAGE_KEY, JSON.stringify({ apiBaseUrl, paired } satisfies Stored));
  } catch {
    // Storage full or disabled: the window works, a reload just needs a new ticket.
  }
}

export function forgetPairing(storage: Storage | null): void {
  try {
    storage?.removeItem(STORAGE_KEY);
  } catch {
    // nothing stored
  }
}

const LANGUAGE_KEY = 'c2c.window.lang';

/**
 * The language of the widget that opened this window: the fragment's, kept for the tab's reloads
 * (the fragment is stripped at once, so a reloaded window has none), else the one kept, else null.
 */
export function openerLanguage(storage: Storage | null, fromFragment: string | null): string | null {
  try {
    if (!fromFragment) return storage?.getItem(LANGUAGE_KEY) ?? null;
    storage?.setItem(LANGUAGE_KEY, fromFragment);
  } catch {
    // storage disabled: a reload speaks the integration's widget language instead
  }
  return fromFragment;
}

/**
 * The attempt id of each ticket this page has tried (memory only: it goes with the ticket, which is
 * gone from the address once read). Every try with a ticket sends the same one, so a try whose
 * answer was lost (the pairing done, the ticket spent) is answered with its engine when Try again
 * asks again, not refused as a used ticket.
 */
const attempts = new Map<string, string>();

function attemptFor(ticket: string): string {
  let attempt = attempts.get(ticket);
  if (!attempt) {
    const bytes = new Uint8Array(16);
    globalThis.crypto.getRandomValues(bytes);
    attempt = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
    attempts.set(ticket, attempt);
  }
  return attempt;
}

/**
 * Pairs with the ticket and its attempt id. A node of an earlier release (a rolling upgrade: the
 * page came from a new one) refuses the field it does not know as invalid_request, before it
 * looked at the ticket: asked again without it.
 */
async function pairWith(api: EngineApi, ticket: string, simulated: boolean): Promise<Paired> {
  try {
    return await api.pair(ticket, simulated, attemptFor(ticket));
  } catch (error) {
    if (error instanceof ApiError && error.code === 'invalid_request') return api.pair(ticket, simulated);
    throw error;
  }
}

/** The first report of a restored window: nothing held, nothing acked, no microphone yet. */
const PROBE = { state: 'enabling', mic_ready: false, busy: false, muted: false, call_id: null, acks: [] } as const;

async function restore(api: EngineApi, storage: Storage | null): Promise<Established | null> {
  const stored = loadPairing(storage, api.baseUrl);
  if (!stored) return null;
  api.token = stored.engine_token;
  try {
    const first = await api.heartbeat({ ...PROBE, acks: [] });
    return { ok: true, paired: stored, first };
  } catch (error) {
    api.token = null;
    if (error instanceof ApiError && (error.status === 0 || error.status === 429 || error.status >= 500)) {
      return { ok: false, reason: 'unreachable', message: MESSAGES.unreachable, retry: true };
    }
    // 403: the platform, the integration or the agent is switched off for now; the token may work again.
    if (error instanceof ApiError && error.status === 403) return { ok: false, reason: 'refused', message: refusalMessage(error.code) ?? error.message, retry: true };
    forgetPairing(storage);
    return null;
  }
}

/**
 * Pairs with the ticket, or continues a stored pairing; says why not otherwise. A new pairing is
 * kept (and so restored by a reload) only once `allowed` said yes (the consent question:
 * consent.ts); a no closes the engine it paired. Asked before keeping: a pairing kept first would
 * be carried on by a reload, or a navigation of the window by its opener, without the answer.
 */
export async function establish(
  api: EngineApi,
  storage: Storage | null,
  ticket: string | null,
  simulated: boolean,
  allowed: (paired: Paired) => Promise<boolean> = async () => true,
): Promise<Established> {
  if (!ticket) return (await restore(api, storage)) ?? { ok: false, reason: 'no_ticket', message: MESSAGES.noTicket, retry: false };
  let paired: Paired;
  try {
    paired = await pairWith(api, ticket, simulated);
    api.token = paired.engine_token;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.code === 'ticket_invalid') {
      // A used ticket with a still-good stored pairing (a reload before the fragment was gone).
      return (await restore(api, storage)) ?? { ok: false, reason: 'ticket_invalid', message: MESSAGES.ticketInvalid, retry: false };
    }
    // The ticket stays unused on agent_busy: the same window may pair once the other's call ends.
    if (error.code === 'agent_busy') return { ok: false, reason: 'agent_busy', message: MESSAGES.agentBusy, retry: true };
    if (error.status === 0 || error.status === 429 || error.status >= 500) return { ok: false, reason: 'unreachable', message: MESSAGES.unreachable, retry: true };
    return { ok: false, reason: 'refused', message: refusalMessage(error.code) ?? error.message, retry: false };
  }
  if (!(await allowed(paired))) {
    await api.close('declined').catch(() => {});
    api.token = null;
    return { ok: false, reason: 'declined', message: MESSAGES.consentDeclined, retry: false };
  }
  savePairing(storage, api.baseUrl, paired);
  return { ok: true, paired, first: null };
}
