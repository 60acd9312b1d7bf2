/**
 * Whether a client may still trust a socket that looks connected. The SDK's transport and the call
 * window's socket both use it. A connection that died without a word looks connected until its
 * ping timeout (up to 20 s), so a request the socket leaves unanswered puts it in doubt: the
 * client then works as if it were down (REST) until anything arrives on it again. One silent for
 * SOCKET_SILENT_MS since it was last heard is dead. A slow server still pings, so its sockets
 * never die of it (closing them would only send every client back at it at once).
 */
import { SOCKET_SILENT_MS } from './events.js';
import type { Timers } from './timers.js';

export interface DoubtEvents {
  /** the socket is in doubt: work as if it were down */
  doubted(): void;
  /** something arrived on it: trust it again */
  trusted(): void;
  /** silent too long: close it (and open another) */
  dead(): void;
}

export class SocketDoubt<H> {
  #lastHeard = 0;
  #doubted = false;
  #timer: H | undefined;

  constructor(
    private readonly timers: Timers<H>,
    private readonly on: DoubtEvents,
  ) {}

  get doubted(): boolean {
    return this.#doubted;
  }

  /** Anything arrived on the connection: a ping, a packet, the connect itself. */
  heard(): void {
    this.#lastHeard = this.timers.now();
    if (this.#settle()) this.on.trusted();
  }

  /** A request went unanswered on the socket, which still looks connected. */
  unanswered(): void {
    const heardAt = this.#lastHeard;
    const deadIn = heardAt + SOCKET_SILENT_MS - this.timers.now();
    if (deadIn <= 0) return this.#die();
    if (this.#doubted) return;
    this.#doubted = true;
    this.on.doubted();
    this.#timer = this.timers.after(deadIn, () => {
      this.#timer = undefined;
      if (this.#doubted && this.#lastHeard === heardAt) this.#die();
    });
  }

  /** The socket went (or the client stopped): nothing is left in doubt. */
  reset(): void {
    this.#settle();
  }

  #die(): void {
    this.#settle();
    this.on.dead();
  }

  /** Ends a doubt; true if there was one. */
  #settle(): boolean {
    this.timers.cancel(this.#timer);
    this.#timer = undefined;
    const was = this.#doubted;
    this.#doubted = false;
    return was;
  }
}
