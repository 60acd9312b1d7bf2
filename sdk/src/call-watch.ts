/**
 * The 30 s rule (spec section 4, "Integrator backend endpoints"): after the requestCallEndpoint
 * accepted a call, a call must appear in the agent's state within LIMITS.callStartWaitSeconds, or
 * the widget says 'The call did not start' — a backend that always answers 200 hides refusals.
 */
import { LIMITS } from '../../shared/limits.js';
import type { Call } from './contract.js';
import type { Clock, TimerHandle } from './timing.js';

export class CallWatch {
  private awaited: { requestId: string | null; previous: string | null; timer: TimerHandle } | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly onTimeout: () => void,
  ) {}

  get waiting(): boolean {
    return this.awaited !== null;
  }

  /**
   * Starts waiting for the call the backend answered (its request_id), or, when the answer names
   * none, for any call other than `previous` (the one shown before the request).
   */
  start(requestId: string | null, previous: string | null, current: Call | null): void {
    this.stop();
    const timer = this.clock.after(LIMITS.callStartWaitSeconds * 1000, () => {
      this.awaited = null;
      this.onTimeout();
    });
    this.awaited = { requestId, previous, timer };
    this.check(current); // the call's push may have come before the backend's answer
  }

  /** A snapshot's call: the awaited one ends the wait. */
  check(call: Call | null): void {
    const a = this.awaited;
    if (!a || !call) return;
    if (a.requestId ? call.request_id === a.requestId : call.request_id !== a.previous) this.stop();
  }

  stop(): void {
    this.clock.cancel(this.awaited?.timer);
    this.awaited = null;
  }
}
