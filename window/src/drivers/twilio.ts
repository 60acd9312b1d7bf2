/**
 * The Twilio voice driver: a Device from @twilio/voice-sdk registered as c2c_<engine_id>. It
 * places claimed calls with connect({params}), takes incoming ones from the Device's `incoming`
 * event, and gets fresh tokens through updateToken. The Device comes from an injected factory, so
 * this file never imports the SDK itself: twilio-entry.ts passes the real constructor, the unit
 * tests a fake.
 */
import { INCOMING_CALL_PARAMETER } from '../../../shared/prefixes.js';
import { DTMF_DIGITS, DriverError, DriverEvents, type ConnectParams, type DriverListener, type VoiceDriver } from './types.js';

type Listener = (...args: any[]) => void;

/** The part of @twilio/voice-sdk's Call this driver uses. */
export interface TwilioCallLike {
  accept(): void;
  reject(): void;
  disconnect(): void;
  mute(shouldMute?: boolean): void;
  isMuted(): boolean;
  sendDigits(digits: string): void;
  on(event: string, listener: Listener): unknown;
  readonly customParameters?: Map<string, string>;
  readonly parameters?: Record<string, string>;
}

/** The part of @twilio/voice-sdk's Device this driver uses. */
export interface TwilioDeviceLike {
  register(): Promise<void>;
  unregister(): Promise<void>;
  updateToken(token: string): void;
  connect(options: { params: Record<string, string> }): Promise<TwilioCallLike>;
  destroy(): void;
  on(event: string, listener: Listener): unknown;
}

/** Device options this driver sets (a subset of Device.Options). */
export interface TwilioDeviceOptions {
  appName: string;
  /** the window warns before unload itself, only during a call */
  closeProtection: boolean;
  logLevel: 'error' | 'warn' | 'info' | 'debug';
  /** how long before expiry the Device emits tokenWillExpire */
  tokenRefreshMs: number;
}

export type DeviceFactory = (token: string, options: TwilioDeviceOptions) => TwilioDeviceLike;

export interface TwilioDriverOptions {
  createDevice: DeviceFactory;
  /** register for incoming calls (when the agent's policy allows them at pairing; setRegistration changes it) */
  register: boolean;
  /**
   * Where the SDK's errors go whole (English message, details), for whoever supports the agent: the
   * window shows only their code, worded. The browser console by default (the SDK logs them only
   * at debug level).
   */
  logError?: (error: unknown) => void;
}

/**
 * How long an answer that came before the Device rang waits for the ring. The service records an
 * incoming call, and the widget shows it with Answer, as it hands Twilio the TwiML that rings this
 * Device; Twilio's ring reaches the Device a moment later, and an agent quick to click is not
 * refused for it.
 */
export const RING_WAIT_MS = 5000;

/**
 * How long placing a call waits for Twilio. The voice SDK's connect() waits for its signalling
 * connection, and where that never comes up (a firewall that blocks wss://*.twilio.com, a network
 * lost) it waits without end: the window would hold the claim, and take no other call, for good.
 * Given up well before the service's own connect timeout (60 s), so the window says why and has
 * the call ended at once; a call that still comes up after is let go.
 */
export const CONNECT_WAIT_MS = 15_000;

/** Custom parameters an incoming call may carry to name its call intent: the service's TwiML names it with the first. */
const REF_PARAMETERS = [INCOMING_CALL_PARAMETER, 'call_id', 'To'];

export class TwilioDriver implements VoiceDriver {
  readonly kind = 'twilio' as const;
  readonly #options: TwilioDriverOptions;
  readonly #events = new DriverEvents();
  #device: TwilioDeviceLike | null = null;
  /** the call in progress (placed, or accepted) */
  #call: TwilioCallLike | null = null;
  /** the call ringing this device, not yet answered */
  #incoming: TwilioCallLike | null = null;
  /** answers waiting for the Device to ring (RING_WAIT_MS): told of the next ring, or of none (null) */
  readonly #ringWaiters = new Set<(call: TwilioCallLike | null) => void>();
  /** null: not tried yet; false: the last registration failed, or was let go or lost */
  #registered: boolean | null = null;
  /** whether the agent's policy wants the device registered for incoming calls */
  #wanted: boolean;
  /** the register() and unregister() calls on their way, one at a time (#sync) */
  #syncing: Promise<void> | null = null;

  constructor(options: TwilioDriverOptions) {
    this.#options = options;
    this.#wanted = options.register;
  }

  get ready(): boolean {
    return this.#device !== null;
  }

  get registered(): boolean {
    return this.#device !== null && this.#registered === true;
  }

  setRegistration(wanted: boolean): void {
    if (wanted === this.#wanted) return;
    this.#wanted = wanted;
    const device = this.#device;
    if (!device) return;
    // A registration that failed is no longer wanted: what the window says of it is over.
    if (!wanted && this.#registered === false) {
      this.#registered = null;
      this.#events.emit({ type: 'registered' });
    }
    void this.#sync(device);
  }

  async start(token: string): Promise<void> {
    if (this.#device) return this.updateToken(token);
    const device = this.#options.createDevice(token, { appName: 'click2call', closeProtection: false, logLevel: 'warn', tokenRefreshMs: 60_000 });
    this.#device = device;
    device.on('incoming', (call: TwilioCallLike) => this.#ring(call));
    device.on('tokenWillExpire', () => this.#events.emit({ type: 'token-expiring' }));
    device.on('error', (error: unknown) => this.#error(error));
    // The Device drops its registration when its signalling connection is lost, and registers
    // again once it is back. Said at once, so that the window's next heartbeat goes now and no
    // incoming call is routed to a window that cannot ring until its next periodic one.
    device.on('unregistered', () => {
      if (this.#device !== device || this.#syncing) return;
      const lost = this.#registered === true && this.#wanted;
      this.#registered = false;
      if (lost) this.#events.emit({ type: 'unregistered' });
    });
    device.on('registered', () => {
      if (this.#device !== device || this.#syncing || !this.#wanted) return;
      if (this.#registered === false) this.#events.emit({ type: 'registered' });
      this.#registered = true;
    });
    await this.#sync(device);
  }

  /**
   * Brings the Device's registration to what the policy wants, one register() or unregister() at a
   * time: a call made while one is on its way joins it, and the loop then looks again, so turning
   * incoming calls off and on meanwhile ends where the policy now stands. A registration that
   * fails stops the loop (it is tried again with the next voice token, not at once).
   */
  #sync(device: TwilioDeviceLike): Promise<void> {
    if (this.#syncing) return this.#syncing;
    const syncing = (async () => {
      while (this.#device === device) {
        if (this.#wanted && this.#registered !== true) {
          if (!(await this.#register(device))) break;
        } else if (!this.#wanted && this.#registered === true) {
          if (!(await this.#unregister(device))) break;
        } else break;
      }
    })().finally(() => {
      if (this.#syncing === syncing) this.#syncing = null;
    });
    this.#syncing = syncing;
    return syncing;
  }

  /** One registration for incoming calls; false when it failed. */
  async #register(device: TwilioDeviceLike): Promise<boolean> {
    try {
      await device.register();
    } catch (error) {
      this.#registered = false;
      // Outgoing calls still work without registration; only incoming ones need it, so this is
      // said until a registration succeeds, not only until the next call shows the device works.
      this.#error(error, true);
      return false;
    }
    // a first registration that worked is nothing to tell; one after a failure ends what was said
    if (this.#registered === false) this.#events.emit({ type: 'registered' });
    this.#registered = true;
    return true;
  }

  /** Lets the registration go (the agent's incoming calls were turned off); false when it failed, nothing said. */
  async #unregister(device: TwilioDeviceLike): Promise<boolean> {
    try {
      await device.unregister();
    } catch {
      // still registered: the server does not route to it while the policy says no
      return false;
    }
    this.#registered = false;
    return true;
  }

  updateToken(token: string): void {
    const device = this.#device;
    device?.updateToken(token);
    if (device && this.#wanted && this.#registered === false) void this.#sync(device);
  }

  async connect(params: ConnectParams): Promise<void> {
    const device = this.#device;
    if (!device) throw new DriverError('not_ready', 'The voice device is not ready.');
    if (this.#call) throw new DriverError('on_call', 'The window is already on a call.');
    const placing = device.connect({ params: { To: params.To, Biz: params.Biz, CallerId: params.CallerId } });
    const call = await new Promise<TwilioCallLike>((resolve, reject) => {
      let givenUp = false;
      const timer = setTimeout(() => {
        givenUp = true;
        reject(new DriverError('unreachable', 'The voice service did not answer in time.'));
      }, CONNECT_WAIT_MS);
      placing.then(
        (placed) => {
          clearTimeout(timer);
          if (givenUp) placed.disconnect(); // its call has been ended: this leg must not reach anyone
          else resolve(placed);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
    this.#call = call;
    this.#wire(call);
  }

  async accept(callId: string | null): Promise<void> {
    // Not while on a call: a ring then is a stray leg, rejected (#ring), so none is waited for.
    const call = this.#incoming ?? (this.#device && !this.#call ? await this.#nextRing() : null);
    if (!call || call !== this.#incoming) throw new DriverError('nothing_ringing', 'No incoming call is ringing in this window.');
    // An answer late for its call (the caller gave up while it waited for the ring) must not pick
    // up the next caller: only a ring naming this call, or naming none, is taken.
    const ref = refOf(call);
    if (callId !== null && ref !== null && ref !== callId) throw new DriverError('other_ringing', 'Another call than the one answered rings in this window.');
    this.#incoming = null;
    this.#call = call;
    call.accept();
  }

  reject(): void {
    const call = this.#incoming;
    this.#incoming = null;
    call?.reject();
  }

  disconnect(): void {
    const call = this.#call;
    this.#call = null;
    call?.disconnect();
    this.reject();
  }

  mute(muted: boolean): void {
    if (!this.#call) throw new DriverError('no_call', 'There is no call to mute.');
    this.#call.mute(muted);
  }

  sendDigits(digits: string): void {
    if (!DTMF_DIGITS.test(digits)) throw new DriverError('bad_digits', 'DTMF digits may contain 0-9, * and # only.');
    if (!this.#call) throw new DriverError('no_call', 'There is no call to send digits to.');
    this.#call.sendDigits(digits);
  }

  on(listener: DriverListener): () => void {
    return this.#events.on(listener);
  }

  destroy(): void {
    for (const waiter of [...this.#ringWaiters]) waiter(null);
    const device = this.#device;
    this.#device = null;
    this.#call = null;
    this.#incoming = null;
    device?.destroy();
    this.#events.clear();
  }

  #ring(call: TwilioCallLike): void {
    if (this.#call || this.#incoming) {
      // One call at a time: the server never rings a busy window, so this is a stray leg.
      call.reject();
      return;
    }
    this.#incoming = call;
    this.#wire(call);
    this.#events.emit({ type: 'incoming', ref: refOf(call) });
    for (const waiter of [...this.#ringWaiters]) waiter(call);
  }

  /** The next call to ring this Device within RING_WAIT_MS, else null. */
  #nextRing(): Promise<TwilioCallLike | null> {
    return new Promise((resolve) => {
      const done = (call: TwilioCallLike | null) => {
        clearTimeout(timer);
        this.#ringWaiters.delete(done);
        resolve(call);
      };
      const timer = setTimeout(() => done(null), RING_WAIT_MS);
      this.#ringWaiters.add(done);
    });
  }

  #wire(call: TwilioCallLike): void {
    // Told only for the leg the driver still holds: one it let go (disconnect, reject) ends later,
    // when the window may hold the next call, which that late event must not end.
    // whether this leg was the driver's until it ended by itself (not let go by disconnect or reject)
    let endedOurs = false;
    const gone = () => {
      const ours = this.#call === call || this.#incoming === call;
      if (this.#call === call) this.#call = null;
      if (this.#incoming === call) this.#incoming = null;
      if (ours) {
        endedOurs = true;
        this.#events.emit({ type: 'disconnected' });
      }
    };
    call.on('accept', () => {
      if (this.#incoming === call) this.#incoming = null;
      this.#call = call;
      this.#events.emit({ type: 'accepted' });
    });
    call.on('ringing', () => this.#events.emit({ type: 'ringing' }));
    call.on('mute', (muted: boolean) => this.#events.emit({ type: 'muted', muted }));
    call.on('disconnect', gone);
    call.on('cancel', gone);
    call.on('reject', gone);
    call.on('error', (error: unknown) => {
      const code = codeOf(error);
      if (code === null || !MIC_ERRORS.has(code)) return this.#error(error);
      // The SDK ends the leg, then says why: said of the driver's own leg, ended or not, never of
      // one it let go (the window may hold the next call, whose microphone this says nothing of).
      if (this.#call === call || this.#incoming === call || endedOurs) this.#events.emit({ type: 'mic-failed' });
    });
  }

  /** Logs an error of the SDK whole, and tells the window its code. */
  #error(error: unknown, lasting?: boolean): void {
    (this.#options.logError ?? logToConsole)(error);
    this.#events.emit(lasting ? { type: 'error', code: codeOf(error), lasting } : { type: 'error', code: codeOf(error) });
  }
}

/**
 * The Call's errors that say it could not open the microphone (it asks for its own stream after
 * connect or accept): @twilio/voice-sdk 2.x's UserMediaErrors, and the 1.x codes it still
 * recognises. They do not say which of blocked, missing or in use: the window asks the browser.
 */
const MIC_ERRORS = new Set([
  31401, // UserMediaErrors.PermissionDeniedError
  31402, // UserMediaErrors.AcquisitionFailedError
  31208, // 1.x: the user denied access to the microphone
  31201, // 1.x: an error occurred while accessing the microphone
]);

/** The call intent an incoming call names in its custom parameters, if any. */
function refOf(call: TwilioCallLike): string | null {
  return REF_PARAMETERS.map((name) => call.customParameters?.get(name)).find((value) => value) ?? null;
}

const logToConsole = (error: unknown) => console.warn('Twilio voice SDK error:', error);

/**
 * The Twilio error code of what the SDK reported, if it has one. Its English message is not passed
 * on: the window words the code in the agent's language, and the SDK logs the full error itself.
 */
function codeOf(error: unknown): number | null {
  const code = error && typeof error === 'object' && 'code' in error ? error.code : null;
  return typeof code === 'number' && Number.isInteger(code) ? code : null;
}
