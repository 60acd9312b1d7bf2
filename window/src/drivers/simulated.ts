/**
 * The simulated voice driver: no audio at all. The server's simulator plays the device: it
 * connects right after a claim, answers when the window acks an `answer`, and hears the digits
 * when it acks a `dtmf`. So this driver only checks its inputs and keeps the mute flag.
 */
import { DTMF_DIGITS, DriverError, DriverEvents, type ConnectParams, type DriverListener, type VoiceDriver } from './types.js';

export class SimulatedDriver implements VoiceDriver {
  readonly kind = 'simulated' as const;
  #ready = false;
  readonly #events = new DriverEvents();

  get ready(): boolean {
    return this.#ready;
  }

  /** The simulator rings any started window the server routes to: nothing to register with. */
  get registered(): boolean {
    return this.#ready;
  }

  setRegistration(_wanted: boolean): void {}

  async start(_token: string): Promise<void> {
    this.#ready = true;
  }

  updateToken(_token: string): void {}

  /** The server already connected through the simulator when it answered the claim. */
  async connect(_params: ConnectParams): Promise<void> {}

  /** The simulator answers when the server receives this command's `done` ack. */
  async accept(_callId: string | null): Promise<void> {}

  reject(): void {}

  disconnect(): void {}

  mute(muted: boolean): void {
    this.#events.emit({ type: 'muted', muted });
  }

  sendDigits(digits: string): void {
    if (!DTMF_DIGITS.test(digits)) throw new DriverError('bad_digits', 'DTMF digits may contain 0-9, * and # only.');
  }

  on(listener: DriverListener): () => void {
    return this.#events.on(listener);
  }

  destroy(): void {
    this.#ready = false;
    this.#events.clear();
  }
}
