/**
 * The injectable clock. Everything time-dependent (expiry, heartbeats, durations, rate windows,
 * the simulated provider) reads time and schedules work through a Clock, so tests move time with
 * ManualClock.advance() instead of sleeping.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** milliseconds since the Unix epoch */
  now(): number;
  /** run fn after ms of this clock's time */
  after(ms: number, fn: () => void | Promise<void>): Timer;
}

export const seconds = (ms: number): number => Math.floor(ms / 1000);

/**
 * A timer's work that fails is reported as a process warning (on stderr), never left as an
 * unhandled rejection, which would stop the process: the simulator's call timers, say, when the
 * app they post to is already closing.
 */
function runTimer(fn: () => void | Promise<void>): void {
  Promise.resolve()
    .then(fn)
    .catch((error: unknown) => process.emitWarning(`A timer's work failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`));
}

/** A real timer. A class and setTimeout's own argument, not closures: a gateway holds one per widget socket. */
class SystemTimer implements Timer {
  readonly #handle: ReturnType<typeof setTimeout>;

  constructor(ms: number, fn: () => void | Promise<void>) {
    this.#handle = setTimeout(runTimer, ms, fn);
    this.#handle.unref?.();
  }

  cancel(): void {
    clearTimeout(this.#handle);
  }
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after: (ms, fn) => new SystemTimer(ms, fn),
};

/**
 * Real time that never steps (an NTP correction, a VM resumed from a snapshot): epoch time as of
 * the process's start plus a monotonic count since. For measuring intervals, as the Redis liveness
 * probes do, where a wall clock stepped back would hide a silence and one stepped forward invent one.
 */
export const steadyClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  after: systemClock.after,
};

interface Scheduled {
  at: number;
  seq: number;
  fn: () => void | Promise<void>;
  cancelled: boolean;
}

/** A clock that moves only when told to; timers fire in time order during advance(). */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #queue: Scheduled[] = [];

  constructor(start = Date.UTC(2026, 0, 1, 9, 0, 0)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  after(ms: number, fn: () => void | Promise<void>): Timer {
    const item: Scheduled = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn, cancelled: false };
    this.#queue.push(item);
    return { cancel: () => void (item.cancelled = true) };
  }

  /** Move time forward by ms, running every timer that falls due, awaiting each. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      const next = this.#nextDue(target);
      if (!next) break;
      this.#now = next.at;
      next.cancelled = true;
      await next.fn();
    }
    this.#now = target;
  }

  async advanceSeconds(s: number): Promise<void> {
    await this.advance(s * 1000);
  }

  #nextDue(target: number): Scheduled | undefined {
    this.#queue = this.#queue.filter((item) => !item.cancelled);
    let best: Scheduled | undefined;
    for (const item of this.#queue) {
      if (item.at > target) continue;
      if (!best || item.at < best.at || (item.at === best.at && item.seq < best.seq)) best = item;
    }
    return best;
  }
}
