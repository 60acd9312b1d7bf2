/**
 * The voice-driver interface: what the call window needs from a voice SDK. Two drivers implement
 * it: the simulated one (no audio; the server's simulator plays the device) and the Twilio one
 * (a Device from @twilio/voice-sdk, loaded on demand by its own script).
 */

/** What POST /engine/claim returns in connect.params: To is the intent id, never the number. */
export interface ConnectParams {
  To: string;
  Biz: string;
  CallerId: string;
}

/** Things the device tells the window, so it can report them in its next heartbeat. */
export type DriverEvent =
  /** a call rings this device; `ref` is the call intent it carries when the provider sent one */
  | { type: 'incoming'; ref: string | null }
  /** the far end is ringing (outgoing) */
  | { type: 'ringing' }
  /** the device's call is up (outgoing connected, or incoming accepted) */
  | { type: 'accepted' }
  /** the device's call ended, was canceled by the caller, or was rejected: not one the window let go itself (disconnect, reject) */
  | { type: 'disconnected' }
  | { type: 'muted'; muted: boolean }
  /** the device could not open the microphone for a call (blocked, missing, or held by another application) */
  | { type: 'mic-failed' }
  /** the provider token is about to expire: fetch a new one and pass it to updateToken */
  | { type: 'token-expiring' }
  /** registered for incoming calls, or no longer asked to be (after a registration that failed: it is said until this) */
  | { type: 'registered' }
  /** the provider dropped a registration the policy wants (its signalling connection was lost): `registered` follows when it is back */
  | { type: 'unregistered' }
  /**
   * the provider reported an error; `code` is the provider's own (Twilio's) error code, if any: the
   * window words it in the agent's language. `lasting`: not a passing hiccup but a state (a
   * registration for incoming calls that failed), said until the driver reports it over
   */
  | { type: 'error'; code: number | null; lasting?: boolean };

export type DriverListener = (event: DriverEvent) => void;

export interface VoiceDriver {
  readonly kind: 'simulated' | 'twilio';
  /** true once the driver can place and take calls */
  readonly ready: boolean;
  /** registered with the provider for incoming calls now (reported in every heartbeat: only a registered window is rung) */
  readonly registered: boolean;
  /** The agent's policy allows incoming calls, or no longer does: register for them, or let the registration go. */
  setRegistration(wanted: boolean): void;
  /** Starts the device with the first provider token (registers it for incoming calls when asked). */
  start(token: string): Promise<void>;
  /** Hands the device a fresh token before the old one expires. */
  updateToken(token: string): void;
  /** Places the claimed call. */
  connect(params: ConnectParams): Promise<void>;
  /**
   * Answers the ringing call; throws when nothing rings, or when what rings names another call than
   * `callId` (the call the answer is for; null: whichever rings). A driver whose provider rings the
   * device a moment after the service showed the call may wait for that ring (Twilio: RING_WAIT_MS).
   */
  accept(callId: string | null): Promise<void>;
  /** Refuses the ringing call. */
  reject(): void;
  /** Ends the device's call, if any. */
  disconnect(): void;
  /** Mutes or unmutes the microphone on the current call; throws when there is none. */
  mute(muted: boolean): void;
  /** Sends DTMF tones on the current call; throws when there is none. */
  sendDigits(digits: string): void;
  /** Subscribes to device events; returns the unsubscribe function. */
  on(listener: DriverListener): () => void;
  /** Releases the device (window closing, replaced, or stopped). */
  destroy(): void;
}

/** Why a voice driver refused what it was asked (thrown as a DriverError): the window says it in its own language (messages.ts errorText). */
export type DriverRefusal = 'not_ready' | 'on_call' | 'nothing_ringing' | 'other_ringing' | 'no_call' | 'bad_digits' | 'unreachable';

/** A driver's refusal: its English message for logs, its `refusal` for what the agent reads. */
export class DriverError extends Error {
  constructor(
    readonly refusal: DriverRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'DriverError';
  }
}

/**
 * The refusal a thrown error carries, if a driver threw it. Read from its field, not by instanceof:
 * the Twilio driver comes in a bundle of its own, with its own copy of DriverError.
 */
export function driverRefusal(error: unknown): DriverRefusal | null {
  if (!(error instanceof Error) || !('refusal' in error) || typeof error.refusal !== 'string') return null;
  return error.refusal as DriverRefusal;
}

/** Digits a dtmf command may carry (the widget API's rule): 0-9, * and #, w pauses. */
export const DTMF_DIGITS = /^[0-9*#w]+$/;

/** A tiny listener set shared by the drivers. */
export class DriverEvents {
  readonly #listeners = new Set<DriverListener>();

  on(listener: DriverListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  emit(event: DriverEvent): void {
    for (const listener of [...this.#listeners]) listener(event);
  }

  clear(): void {
    this.#listeners.clear();
  }
}
