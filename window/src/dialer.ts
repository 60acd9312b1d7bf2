/**
 * Dial requests: a queued outgoing call is offered to the agent's window (push and heartbeat) until
 * one claim wins. The window claims one at a time, only when it can take a call, and never twice:
 * a 404 means another claim won or the request expired, so it is dropped for good.
 *
 * A claim that got no answer (network, timeout) or a transient refusal (429, 5xx) may still have
 * won: the server then offers the request no more, so waiting for the next delivery would leave the
 * call claimed and never connected until the server's connect timeout failed it. Such a claim is
 * asked again, first of all, every CLAIM_RETRY_MS (or after the Retry-After asked for) and on every
 * delivery, until the server says: it answers the winner's claim again (docs/engine-protocol.md),
 * or 404 once the request is gone.
 */
import { LIMITS } from '../../shared/limits.js';
import { systemTimers, type Timers } from '../../shared/timers.js';
import { ApiError, type Claimed, type DialRequest } from './api.js';

/** How soon a claim whose answer was lost or transient is asked again. */
export const CLAIM_RETRY_MS = 2_000;

export interface DialerDeps {
  claim(requestId: string): Promise<Claimed>;
  /**
   * Ready, with a microphone, and not holding a call other than this one (a claim whose answer was
   * lost: the server's heartbeat answer may already list it as the window's call, not connected).
   */
  canClaim(requestId: string): boolean;
  /** the claim won: take the call and connect the voice driver */
  onClaimed(claimed: Claimed): Promise<void>;
  /** the server's clock now, in ms (to skip requests that already expired) */
  serverNow(): number;
  onError?(error: unknown): void;
  timers?: Timers<unknown>;
}

export class Dialer {
  readonly #deps: DialerDeps;
  readonly #timers: Timers<unknown>;
  /** request ids claimed or dropped: never claimed again */
  readonly #settled = new Set<string>();
  /** the request whose last claim had no clear answer: it may be ours already */
  #unsure: DialRequest | null = null;
  #retry: unknown;
  #claiming = false;
  #stopped = false;

  constructor(deps: DialerDeps) {
    this.#deps = deps;
    this.#timers = deps.timers ?? (systemTimers as Timers<unknown>);
  }

  /** True while a claim (and the connect after it) is in flight. */
  get claiming(): boolean {
    return this.#claiming;
  }

  /** Claims the first open request of a delivery (an unsure claim first), if the window can take a call now. */
  async offer(requests: readonly DialRequest[]): Promise<void> {
    const unsure = this.#unsure;
    const candidates = unsure ? [unsure, ...requests.filter((request) => request.request_id !== unsure.request_id)] : requests;
    for (const request of candidates) {
      const id = request.request_id;
      if (this.#settled.has(id)) continue;
      if (this.#stopped || this.#claiming || !this.#deps.canClaim(id)) return;
      // An unsure claim may have won: the server keeps it claimed until its connect timeout, well after the request's own expiry.
      const deadline = request.expires_at * 1000 + (request === unsure ? LIMITS.claimConnectTimeoutSeconds * 1000 : 0);
      if (deadline <= this.#deps.serverNow()) {
        this.#settle(id);
        continue;
      }
      this.#claiming = true;
      try {
        let claimed: Claimed;
        try {
          claimed = await this.#deps.claim(id);
        } catch (error) {
          const final = error instanceof ApiError && error.status >= 400 && error.status < 500 && error.status !== 429;
          if (!final) {
            this.#askAgain(request, error instanceof ApiError ? error.retryAfterMs : 0);
            this.#deps.onError?.(error);
            return;
          }
          // 404: another claim won or it expired; 401/403/422: it can never be ours.
          this.#settle(id);
          if (error.status !== 404) this.#deps.onError?.(error);
          continue;
        }
        this.#settle(id);
        if (this.#stopped) return;
        await this.#deps.onClaimed(claimed);
        return; // one call at a time
      } finally {
        this.#claiming = false;
      }
    }
  }

  /** The engine stopped: no claim is asked again, and a claim answered from now on is not taken. */
  stop(): void {
    this.#stopped = true;
    this.#timers.cancel(this.#retry);
    this.#unsure = null;
  }

  #askAgain(request: DialRequest, retryAfterMs: number): void {
    if (this.#stopped) return;
    this.#unsure = request;
    this.#timers.cancel(this.#retry);
    this.#retry = this.#timers.after(Math.max(CLAIM_RETRY_MS, retryAfterMs), () => {
      this.#retry = undefined;
      void this.offer([]);
    });
  }

  #settle(id: string): void {
    this.#settled.add(id);
    if (this.#unsure?.request_id !== id) return;
    this.#unsure = null;
    this.#timers.cancel(this.#retry);
  }
}
