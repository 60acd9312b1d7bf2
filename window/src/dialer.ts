/**
 * Dial requests: a queued outgoing call is offered to the agent's window (push and heartbeat) until
 * one claim wins. The window claims one at a time, only when it can take a call, and never twice:
 * a 404 means another claim won or the request expired, so it is dropped for good; a transient
 * failure (network, 429, 5xx) leaves it for the next delivery.
 */
import { ApiError, type Claimed, type DialRequest } from './api.js';

export interface DialerDeps {
  claim(requestId: string): Promise<Claimed>;
  /** ready, with a microphone, and not holding a call */
  canClaim(): boolean;
  /** the claim won: take the call and connect the voice driver */
  onClaimed(claimed: Claimed): Promise<void>;
  /** the server's clock now, in ms (to skip requests that already expired) */
  serverNow(): number;
  onError?(error: unknown): void;
}

export class Dialer {
  readonly #deps: DialerDeps;
  /** request ids claimed or dropped: never claimed again */
  readonly #settled = new Set<string>();
  #claiming = false;

  constructor(deps: DialerDeps) {
    this.#deps = deps;
  }

  /** True while a claim (and the connect after it) is in flight. */
  get claiming(): boolean {
    return this.#claiming;
  }

  /** Claims the first open request of a delivery, if the window can take a call now. */
  async offer(requests: readonly DialRequest[]): Promise<void> {
    for (const request of requests) {
      if (this.#claiming || !this.#deps.canClaim()) return;
      const id = request.request_id;
      if (this.#settled.has(id)) continue;
      if (request.expires_at * 1000 <= this.#deps.serverNow()) {
        this.#settled.add(id);
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
            this.#deps.onError?.(error); // transient: the next delivery retries
            return;
          }
          // 404: another claim won or it expired; 401/403/422: it can never be ours.
          this.#settled.add(id);
          if (error.status !== 404) this.#deps.onError?.(error);
          continue;
        }
        this.#settled.add(id);
        await this.#deps.onClaimed(claimed);
        return; // one call at a time
      } finally {
        this.#claiming = false;
      }
    }
  }
}
