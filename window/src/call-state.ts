/**
 * The call the window holds (or rings), as the server last described it: from a claim, from a
 * heartbeat answer (the engine's live call, incoming ones included), or from a hangup answer.
 * Once it ends the window keeps showing it, stopped, until the next call.
 */
import type { Call, CallStatus } from '../../shared/types.js';

export const LIVE_STATUSES: readonly CallStatus[] = ['queued', 'claimed', 'dialing', 'ringing', 'connected', 'incoming'];

export interface HeldCall {
  call: Call;
  /** local time (ms) the server's description arrived, for the timer */
  receivedAt: number;
  /** the window no longer holds it (it ended, or the server stopped listing it) */
  ended: boolean;
  /** local time (ms) the window stopped holding it without a final description, else null */
  lostAt: number | null;
}

export class CallState {
  #current: HeldCall | null = null;
  /**
   * Calls that are over for this window: the server gave a final status (a hang-up answer, say), or
   * their device leg ended here. An answer to a heartbeat sent before that, listing them live,
   * arrives late and does not bring them back: a call's status never goes from final to live.
   */
  readonly #released = new Set<string>();
  /** a call answered by command before any answer described it (the push beat the heartbeat) */
  #answered: string | null = null;

  get current(): HeldCall | null {
    return this.#current;
  }

  /** The live call held or ringing, else null. */
  get heldId(): string | null {
    return this.#current && !this.#current.ended ? this.#current.call.call_id : null;
  }

  /** The call_id for heartbeats: the held call, or one just answered and not yet described. */
  get reportId(): string | null {
    return this.heldId ?? this.#answered;
  }

  /** Takes the server's description of a call (a final status ends it). True when the reported id changed. */
  update(call: Call, now: number): boolean {
    const live = LIVE_STATUSES.includes(call.status);
    if (live && this.#released.has(call.call_id)) return false;
    if (!live) this.#released.add(call.call_id);
    const before = this.reportId;
    this.#current = { call, receivedAt: now, ended: !live, lostAt: null };
    this.#answered = null;
    return before !== this.reportId;
  }

  /** A heartbeat answer's call: the engine's live call, or null when it has none. */
  reconcile(call: Call | null, now: number): boolean {
    return call ? this.update(call, now) : this.end(now);
  }

  /** The window no longer holds its call; `release` when its device leg ended here. */
  end(now: number, release = false): boolean {
    const before = this.reportId;
    if (release && before) this.#released.add(before);
    if (this.#current && !this.#current.ended) this.#current = { ...this.#current, ended: true, lostAt: now };
    this.#answered = null;
    return before !== null;
  }

  /** An `answer` command was carried out for this call. */
  answered(callId: string | null): void {
    if (callId && this.heldId === null && !this.#released.has(callId)) this.#answered = callId;
  }
}
