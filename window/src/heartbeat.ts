/**
 * Heartbeat scheduling. A Ticker (normally the heartbeat Worker, whose timers background tabs
 * throttle far less than the page's) drives the period: heartbeat_ms while the socket is up,
 * heartbeat_fallback_ms while it is down, since heartbeats then carry every command and dial
 * request. While the window holds a call it also uses the fallback period, because the call's
 * progress (ringing, connected, ended) reaches an engine only in heartbeat answers. Immediate
 * heartbeats (after a push, a claim, a command) share one request in flight with the ticks.
 */

/** A periodic tick source. */
export interface Ticker {
  /** (Re)starts ticking every `ms`, the first tick `ms` from now; 0 stops. */
  setInterval(ms: number): void;
  onTick: (() => void) | null;
  destroy(): void;
}

export interface HeartbeatOptions {
  ticker: Ticker;
  /** sends one heartbeat (socket or REST) and handles its answer; never rejects */
  send: () => Promise<void>;
  heartbeatMs: number;
  fallbackMs: number;
  /** the local clock (ms), for holds */
  now?: () => number;
}

export class HeartbeatScheduler {
  readonly #ticker: Ticker;
  readonly #send: () => Promise<void>;
  #heartbeatMs: number;
  readonly #fallbackMs: number;
  #socketUp = false;
  #onCall = false;
  #running = false;
  #interval = 0;
  #inFlight: Promise<void> | null = null;
  #again = false;
  readonly #now: () => number;
  #heldUntil = 0;

  constructor(options: HeartbeatOptions) {
    this.#ticker = options.ticker;
    this.#send = options.send;
    this.#heartbeatMs = options.heartbeatMs;
    this.#fallbackMs = options.fallbackMs;
    this.#now = options.now ?? (() => Date.now());
    this.#ticker.onTick = () => void this.beat();
  }

  /** The period that applies now. */
  get intervalMs(): number {
    if (!this.#socketUp || this.#onCall) return Math.min(this.#fallbackMs, this.#heartbeatMs);
    return this.#heartbeatMs;
  }

  start(): void {
    this.#running = true;
    this.#apply();
  }

  stop(): void {
    this.#running = false;
    this.#interval = 0;
    this.#ticker.setInterval(0);
  }

  setSocketUp(up: boolean): void {
    this.#socketUp = up;
    this.#apply();
  }

  setOnCall(onCall: boolean): void {
    this.#onCall = onCall;
    this.#apply();
  }

  /** The server may change heartbeat_ms in any heartbeat answer. */
  setHeartbeatMs(ms: number): void {
    if (Number.isFinite(ms) && ms > 0) this.#heartbeatMs = ms;
    this.#apply();
  }

  /**
   * The server refused a heartbeat as rate-limited and said how long to wait: until then no beat
   * goes, neither tick nor immediate one, since each refused one counts against the limit again.
   * The first tick after it carries everything (a heartbeat reports state, not events). The tick
   * comes from the Worker, whose timers a background tab throttles far less than a timeout of the
   * page's own.
   */
  holdFor(ms: number): void {
    this.#heldUntil = Math.max(this.#heldUntil, this.#now() + ms);
  }

  /** Sends a heartbeat now; if one is in flight, one more follows it (never two at once). */
  beat(): Promise<void> {
    if (!this.#running || this.#now() < this.#heldUntil) return Promise.resolve();
    if (this.#inFlight) {
      this.#again = true;
      return this.#inFlight;
    }
    const run = async () => {
      do {
        this.#again = false;
        await this.#send();
      } while (this.#again && this.#running && this.#now() >= this.#heldUntil);
    };
    this.#inFlight = run().finally(() => {
      this.#inFlight = null;
    });
    return this.#inFlight;
  }

  #apply(): void {
    if (!this.#running) return;
    const ms = this.intervalMs;
    if (ms === this.#interval) return;
    this.#interval = ms;
    this.#ticker.setInterval(ms);
  }
}
