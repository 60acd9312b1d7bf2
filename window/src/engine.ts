/**
 * The paired call window's engine: heartbeats (Worker-driven), the socket, commands carried out
 * once, dial requests claimed, the voice driver kept supplied with tokens, and the microphone.
 * It owns the window's state and publishes a ViewModel on every change.
 */
import { NUDGE_MIN_MS } from '../../shared/events.js';
import { spaced } from '../../shared/spaced.js';
import { systemTimers } from '../../shared/timers.js';
import { ApiError, type Claimed, type EngineApi, type EngineCommand, type HeartbeatRequest, type HeartbeatResponse, type Paired } from './api.js';
import { CallState, LIVE_STATUSES } from './call-state.js';
import { CommandRunner } from './commands.js';
import { carryOut, REPORTED_KINDS } from './device-commands.js';
import { Dialer } from './dialer.js';
import type { DriverEvent, VoiceDriver } from './drivers/types.js';
import { HeartbeatScheduler, type Ticker } from './heartbeat.js';
import { errorText, MESSAGES, refusalMessage, voiceErrorText } from './messages.js';
import type { MicState } from './mic.js';
import { forgetPairing } from './session.js';
import type { SocketHandlers } from './socket.js';
import type { ViewModel } from './ui.js';
import { viewModel, type Problems } from './view-model.js';
import { VoiceKeeper } from './voice.js';

/** What the engine needs from the socket (EngineSocket, or a fake in tests). */
export interface EngineSocketLike {
  readonly connected: boolean;
  heartbeat(report: HeartbeatRequest): Promise<HeartbeatResponse>;
  ack(acks: HeartbeatRequest['acks']): Promise<boolean>;
  stop(): void;
}

export interface EngineDeps {
  api: EngineApi;
  storage: Storage | null;
  loadDriver(paired: Paired): Promise<VoiceDriver>;
  ticker: Ticker;
  /** null when there is no gateway: heartbeats alone carry everything */
  connectSocket: ((paired: Paired, handlers: SocketHandlers) => EngineSocketLike) | null;
  askMic(): Promise<MicState>;
  focus(): void;
  now(): number;
  /**
   * Tells the widget in this browser that opened the window that its state moved (the spec's
   * "window message nudge"): a widget whose socket is down then polls at once instead of at its
   * next poll. The message says nothing else.
   */
  tellWidget?(): void;
}

/**
 * How long after a claimed call's voice leg ended, before it connected, the window waits for the
 * server to show that the provider reached it (the call `dialing`, or ended with the provider's
 * outcome). Still `claimed` then, the provider never heard of it and never will: the window has
 * the server end it rather than leave the agent busy until the connect timeout.
 */
export const LEG_LOST_GRACE_MS = 3_000;

/** A claimed call whose voice leg ended before it connected (Engine.#lostLeg). */
interface LostLeg {
  callId: string;
  /** LEG_LOST_GRACE_MS have passed (its timer fired): a heartbeat sent from now on says what became of the call */
  graceOver: boolean;
  check: ReturnType<typeof setTimeout>;
}

/** The wait before loading a failed voice driver again, doubled with each failure in a row up to the max. */
const DRIVER_RETRY_MS = 3_000;
const DRIVER_RETRY_MAX_MS = 300_000;

/** What a voice device does only when it works: its passing error is no longer what to say. */
const WORKING_EVENTS = new Set<DriverEvent['type']>(['incoming', 'ringing', 'accepted']);

/** Refusals after which this engine token will never work again. */
// origin_not_allowed: the window runs somewhere other than the service's own pages (or is another
// extension), which REST and the gateway both refuse (api/domain/engines/origins.ts).
const FINAL_CODES = new Set(['unauthorized', 'replaced', 'platform_disabled', 'integration_disabled', 'agent_disabled', 'agent_not_assigned', 'agent_unknown', 'origin_not_allowed']);
const finalMessage = refusalMessage;

const isFinal = (error: unknown): error is ApiError => error instanceof ApiError && (error.status === 401 || FINAL_CODES.has(error.code));
const text = (error: unknown) => errorText(error, String(error));

export class Engine {
  readonly #paired: Paired;
  readonly #deps: EngineDeps;
  readonly #calls = new CallState();
  readonly #runner: CommandRunner;
  readonly #scheduler: HeartbeatScheduler;
  readonly #dialer: Dialer;
  readonly #voice: VoiceKeeper;
  readonly #listeners = new Set<(model: ViewModel) => void>();
  #socket: EngineSocketLike | null = null;
  #socketUp = false;
  #driver: VoiceDriver | null = null;
  /**
   * a driver being loaded; the loads that failed in a row (it is tried again with the heartbeats),
   * and when (local clock, ms) the next may start
   */
  #driverLoading: Promise<void> | null = null;
  #driverFailures = 0;
  #driverRetryAt = 0;
  /** the device's last passing error, while it is what the window says */
  #deviceError: string | null = null;
  /** whether heartbeats report `registered`: once an answer came from a node that knows it (#exchange) */
  #nodesTakeRegistered = false;
  /** why the device is not registered for incoming calls, until it is: said whenever nothing else is */
  #unregistered: string | null = null;
  /** the agent's in-call controls: the pairing's, then each heartbeat answer's (an operator may change them) */
  #controls: Paired['policy']['controls'];
  #mic: MicState = 'asking';
  #muted = false;
  /** server clock − local clock, from the last heartbeat answer */
  #offsetMs = 0;
  /** the heartbeats widgets' nudges ask for (nudge) */
  readonly #nudgedBeat = spaced({ ...systemTimers, now: () => this.#deps.now() }, NUDGE_MIN_MS, () => {
    if (!this.#stopped && !this.#socket?.connected) void this.#scheduler.beat();
  });
  /** the engine version and call the widget was last told of */
  #toldWidget = '';
  /** bumped when the window takes a call, so an answer to an earlier heartbeat cannot end it */
  #epoch = 0;
  #stopped = false;
  #hangupBusy = false;
  #answerBusy = false;
  /** the incoming call this window's device took or is taking (answered), until the service says it is connected */
  #takenHere: string | null = null;
  readonly #problems: Problems = { final: null, call: null, voice: null, connection: false };
  /** the call the window last held (or null), to tell when it changes */
  #lastHeld: string | null = null;
  /** the call the device says rings on it (its `incoming` ref), until it is answered or gone */
  #ringingRef: string | null = null;
  /**
   * The claimed call whose voice leg ended before it connected, until the server shows what became
   * of it or the device has another leg (#checkLostLeg); a `mic-failed` may follow its end.
   */
  #legLost: LostLeg | null = null;
  /**
   * What problems.call is about, which decides how long it stays: `device` (a mute that failed)
   * goes when its call does; `hangup` (a hang-up that may not have worked) stays, also through the
   * window letting go of its own leg, until the server says that call is over; `connect` (why a
   * call could not be connected) stays until the next call.
   */
  #callProblem: { kind: 'device' | 'hangup' | 'connect'; callId: string | null } | null = null;

  constructor(paired: Paired, deps: EngineDeps) {
    this.#paired = paired;
    this.#controls = paired.policy.controls;
    this.#deps = deps;
    deps.api.token = paired.engine_token;
    this.#runner = new CommandRunner((command) => this.#execute(command));
    this.#scheduler = new HeartbeatScheduler({ ticker: deps.ticker, send: () => this.#beat(), heartbeatMs: paired.heartbeat_ms, fallbackMs: paired.heartbeat_fallback_ms, now: deps.now });
    this.#dialer = new Dialer({
      claim: (id) => deps.api.claim(id),
      canClaim: (requestId) => !this.#stopped && this.#ready() && (this.#calls.reportId === null || this.#calls.reportId === requestId),
      onClaimed: (claimed) => this.#take(claimed),
      serverNow: () => this.#serverNow(),
      onError: (error) => {
        if (isFinal(error)) this.#stop(error.code, error.message);
      },
    });
    this.#voice = new VoiceKeeper({
      api: deps.api,
      driver: () => (this.#stopped ? null : this.#driver),
      onRefused: (error) => {
        if (!isFinal(error)) return false;
        this.#stop(error.code, error.message);
        return true;
      },
      onProblem: (problem) => {
        // a driver that could not be loaded, or a registration that failed, stays said until it is over
        this.#problems.voice = problem ?? (this.#driverFailures > 0 ? MESSAGES.voiceScriptFailed : this.#unregistered);
      },
      onSettled: () => {
        this.#changed();
        void this.#scheduler.beat();
      },
    });
  }

  /** Starts everything; `first` is the answer of the heartbeat that restored a stored pairing. */
  async start(first: HeartbeatResponse | null): Promise<void> {
    this.#scheduler.start();
    const { connectSocket } = this.#deps;
    if (connectSocket && this.#paired.realtime.available) {
      this.#socket = connectSocket(this.#paired, {
        onUp: () => this.#setSocket(true),
        onDown: () => this.#setSocket(false),
        onWork: (work) => void this.#onWork(work.commands, work.dial_requests, true),
        onFinal: (end) => this.#stop(end.code, end.message),
      });
    }
    const voice = this.#loadDriver().then(() => this.#voice.refresh());
    if (first) await this.#handle(first, { epoch: this.#epoch, graceOverFor: null });
    else void this.#scheduler.beat();
    await Promise.all([voice, this.retryMic()]);
  }

  /**
   * Loads the voice driver. One that failed to load (a network blip, a blocker, a deploy gap) is
   * loaded again with the heartbeats until it comes, saying so meanwhile: a reload would not help
   * (it closes this pairing), and without a driver the window can carry no call. Each failure in a
   * row doubles the wait before the next (3 s to 5 min): a script that keeps failing is a large
   * download and parse each time, on the agent's machine for a whole shift.
   */
  #loadDriver(): Promise<void> {
    this.#driverLoading ??= this.#deps.loadDriver(this.#paired).then(
      (loaded) => {
        if (this.#stopped) return loaded.destroy();
        this.#driver = loaded;
        this.#driverFailures = 0;
        if (this.#problems.voice === MESSAGES.voiceScriptFailed) this.#problems.voice = null;
        loaded.on((event) => this.#onDriver(event));
      },
      () => {
        this.#driverFailures += 1;
        this.#driverRetryAt = this.#deps.now() + Math.min(DRIVER_RETRY_MS * 2 ** (this.#driverFailures - 1), DRIVER_RETRY_MAX_MS);
        this.#problems.voice = MESSAGES.voiceScriptFailed;
      },
    ).finally(() => {
      this.#driverLoading = null;
    });
    return this.#driverLoading;
  }

  onChange(listener: (model: ViewModel) => void): () => void {
    this.#listeners.add(listener);
    listener(this.model());
    return () => this.#listeners.delete(listener);
  }

  /** True once the engine ended for good (a final refusal or ending): the window then needs a new ticket. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** True while the window holds or rings a call (the page warns before unload then). */
  get onCall(): boolean {
    return this.#calls.reportId !== null;
  }

  model(): ViewModel {
    return viewModel({
      paired: this.#paired,
      controls: this.#controls,
      stopped: this.#stopped,
      held: this.#calls.current,
      reportId: this.#calls.reportId,
      mic: this.#mic,
      ready: this.#ready(),
      muted: this.#muted,
      hangupBusy: this.#hangupBusy,
      answerBusy: this.#answerBusy,
      takenHere: this.#takenHere,
      problems: this.#problems,
      socketUp: this.#socket ? this.#socketUp : null,
    });
  }

  /** Asks for the microphone (again), then reports the result at once. */
  async retryMic(): Promise<void> {
    this.#mic = 'asking';
    this.#changed();
    // not ready while the browser asks: said at once, so no call rings here meanwhile
    void this.#scheduler.beat();
    this.#mic = await this.#deps.askMic();
    this.#changed();
    void this.#scheduler.beat();
  }

  /**
   * The browser's microphone permission changed: the user allowed or blocked it, or reset it (a
   * one-time grant lapsing does too). Reset, it is asked for again now, while the window says so,
   * rather than on the next call's answer: until then the window is not ready, so no call rings here.
   */
  micPermission(state: PermissionState): void {
    if (this.#stopped) return;
    if (state === 'granted' && this.#mic !== 'ready' && this.#mic !== 'asking') void this.retryMic();
    if (state === 'prompt' && this.#mic === 'ready') void this.retryMic();
    if (state === 'denied' && this.#mic !== 'denied') this.#micLost('denied');
  }

  /**
   * Microphones were plugged in or out. With none left the window is not ready (an incoming call
   * would ring an agent who cannot speak) and says so; when one is back, it is asked for again.
   */
  micDevices(present: boolean): void {
    if (this.#stopped) return;
    if (!present && this.#mic === 'ready') this.#micLost('missing');
    if (present && this.#mic === 'missing') void this.retryMic();
  }

  #micLost(why: 'denied' | 'missing'): void {
    this.#mic = why;
    this.#changed();
    void this.#scheduler.beat();
  }

  /**
   * The Answer button, for an incoming call ringing here: the device answers it (a real one through
   * the provider, which tells the server) and the server is told (it answers a simulated device's
   * call itself). The agent need not have the CRM open: the window rings and names the caller.
   */
  async answer(): Promise<void> {
    const held = this.#calls.current;
    const call = held && !held.ended ? held.call : null;
    if (this.#stopped || this.#answerBusy || !this.#driver || call?.direction !== 'inbound' || call.status !== 'incoming') return;
    // taken already (a press before, the widget's answer): the provider's report of it is on its way
    if (this.#takenHere === call.call_id) return;
    this.#answerBusy = true;
    // taken from now: the widget's answer for it, while the device waits for the ring, is done, not a second accept
    this.#takenHere = call.call_id;
    this.#changed();
    try {
      await this.#driver.accept(call.call_id);
      this.#tookCall(call.call_id);
    } catch (error) {
      this.#takenHere = null;
      this.#answerBusy = false;
      this.#setCallProblem(errorText(error, MESSAGES.answerFailed), 'connect');
      return this.#afterCallChange();
    }
    try {
      const answer = await this.#deps.api.answer(call.call_id);
      // a simulated device's call, answered by the service; a real one's answer comes from the provider
      if (answer.call.status === 'connected' && this.#calls.current?.call.call_id === call.call_id) this.#calls.update(answer.call, this.#deps.now());
    } catch (error) {
      if (isFinal(error)) return this.#stop(error.code, error.message);
      // A real device has the call whatever this request did: the provider tells the service. A
      // simulated one's is the service's to answer, and the agent may try again.
      if (this.#paired.voice_provider === 'simulated') {
        this.#takenHere = null;
        this.#setCallProblem(MESSAGES.answerFailed, 'connect');
      }
    } finally {
      this.#answerBusy = false;
      this.#afterCallChange();
    }
  }

  /** The device took this incoming call (the Answer button, the widget's command): held from now on, answered no more. */
  #tookCall(callId: string | null): void {
    this.#takenHere = callId;
    this.#calls.answered(callId);
    this.#epoch += 1;
    // held from now on (on-call heartbeats; its end, when the server says it, lets the device's leg go)
    this.#afterCallChange();
  }

  /** The Hang up button: the server ends the call through the provider. */
  async hangup(): Promise<void> {
    if (this.#stopped || this.#hangupBusy) return;
    this.#hangupBusy = true;
    // A failure said before goes while this attempt runs: failing alike, it is said (and heard) again.
    if (this.#callProblem?.kind === 'hangup') this.#setCallProblem(null);
    this.#changed();
    try {
      const answer = await this.#deps.api.hangup(this.#calls.reportId);
      this.#setCallProblem(null);
      if (answer.call) this.#calls.update(answer.call, this.#deps.now());
      else this.#calls.end(this.#deps.now());
    } catch (error) {
      if (isFinal(error)) return this.#stop(error.code, error.message);
      this.#setCallProblem(error instanceof ApiError && error.code === 'hangup_uncertain' ? MESSAGES.hangupUncertain : MESSAGES.hangupFailed, 'hangup');
    } finally {
      // Also end the device's own leg: with a real voice SDK that ends the call in any case.
      if (!this.#calls.heldId || this.#problems.call) this.#letGoOfDevice();
      this.#hangupBusy = false;
      this.#afterCallChange();
    }
  }

  /** The Mute button (offered only when the policy enables mute). */
  toggleMute(): void {
    if (!this.#driver || this.#calls.heldId === null) return;
    const next = !this.#muted;
    try {
      this.#driver.mute(next);
      this.#muted = next;
      this.#setCallProblem(null);
    } catch (error) {
      this.#setCallProblem(text(error), 'device');
    }
    this.#changed();
    void this.#scheduler.beat();
  }

  /** pagehide: tell the server the window is going (its calls become orphaned, not ended). */
  unload(): void {
    if (this.#stopped) return;
    this.#deps.api.closeOnUnload();
    this.#halt();
  }

  /** pageshow from the back/forward cache: report at once. */
  resume(): void {
    void this.#scheduler.beat();
  }

  /**
   * A widget in this browser sent a command for this window (a window message: the spec's
   * "window message nudge"). While the socket is up the command is pushed anyway; while it is
   * down the window heartbeats now, rather than up to heartbeat_fallback_ms later, and the answer
   * carries the command. At most once every NUDGE_MIN_MS: any page holding the window could send
   * nudges, and a flood must not spend the engine's rate limit.
   */
  nudge(): void {
    if (!this.#stopped && !this.#socket?.connected) this.#nudgedBeat.call();
  }

  #ready(): boolean {
    return this.#mic === 'ready' && this.#driver?.ready === true;
  }

  #serverNow(): number {
    return this.#deps.now() + this.#offsetMs;
  }

  /** One heartbeat: over the socket when it is up, else REST; then handles the answer. */
  async #beat(): Promise<void> {
    if (this.#stopped) return;
    if (this.#driver) this.#voice.maybeRefresh(this.#serverNow());
    else if (this.#driverFailures > 0 && !this.#driverLoading && this.#deps.now() >= this.#driverRetryAt) {
      void this.#loadDriver().then(() => {
        if (this.#driver) return this.#voice.refresh();
        this.#changed();
      });
    }
    const acks = this.#runner.pendingAcks();
    const lost = this.#legLost;
    const sent = { epoch: this.#epoch, graceOverFor: lost?.graceOver ? lost.callId : null };
    const report: HeartbeatRequest = {
      state: this.#ready() ? 'ready' : 'enabling',
      mic_ready: this.#mic === 'ready',
      busy: false,
      muted: this.#muted,
      call_id: this.#calls.reportId,
      acks,
      ...(this.#nodesTakeRegistered ? { registered: this.#driver?.registered ?? false } : {}),
    };
    let answer: HeartbeatResponse;
    try {
      answer = await this.#exchange(report);
    } catch (error) {
      if (this.#stopped) return;
      if (isFinal(error)) return this.#stop(error.code, error.message);
      if (error instanceof ApiError && error.status === 429) this.#scheduler.holdFor(error.retryAfterMs);
      this.#problems.connection = true;
      return this.#changed();
    }
    // A window stopped meanwhile (a final end while this heartbeat was on its way) is over: an
    // answer from before that end would bring its call back on screen, on a window that can no
    // longer hang it up.
    if (this.#stopped) return;
    this.#problems.connection = false;
    this.#runner.confirm(acks);
    await this.#handle(answer, sent, acks.some((ack) => ack.result === 'failed'));
  }

  /**
   * A report goes in the shape its node takes: a node of an earlier release refuses a field it does
   * not know (`registered`) as invalid_request. A rolling upgrade serves the window from a new node
   * while its requests may still reach old ones, so the field is sent only once an answer showed a
   * node that knows it (`inbound`), and a report refused for it goes again at once without it.
   */
  async #exchange(report: HeartbeatRequest): Promise<HeartbeatResponse> {
    try {
      return await this.#exchangeOnce(report);
    } catch (error) {
      if (report.registered === undefined || !(error instanceof ApiError) || error.code !== 'invalid_request') throw error;
      this.#nodesTakeRegistered = false;
      const { registered: _, ...earlier } = report;
      return this.#exchangeOnce(earlier);
    }
  }

  async #exchangeOnce(report: HeartbeatRequest): Promise<HeartbeatResponse> {
    const socket = this.#socket;
    if (socket?.connected) {
      try {
        return await socket.heartbeat(report);
      } catch (error) {
        // A refusal is the service's answer; a failure of the gateway's node (its store out of
        // reach: service_unavailable) is not the service's: another node may take the report over
        // REST, and a window heard by nobody for 90 s has its calls ended.
        if (error instanceof ApiError && error.status < 500) throw error;
        // No reply in time: the socket is half dead; REST decides. (Not for a window that stopped
        // meanwhile: a final end drops the socket, which fails the heartbeat on its way.)
        if (this.#stopped) throw error;
      }
    }
    return this.#deps.api.heartbeat(report);
  }

  /**
   * `sent`: the window's call epoch when the heartbeat went (an answer to a report from before the
   * window took another call does not describe its call), and the lost leg whose grace was over by
   * then (#checkLostLeg). `reportedFailure`: the heartbeat carried a failed ack, which moved the
   * agent's state (WidgetState.failed_command), not the engine's.
   */
  async #handle(answer: HeartbeatResponse, sent: { epoch: number; graceOverFor: string | null }, reportedFailure = false): Promise<void> {
    const { epoch } = sent;
    this.#offsetMs = answer.server_time * 1000 - this.#deps.now();
    const shown = `${answer.engine.version}|${answer.call?.request_id ?? ''}|${answer.call?.status ?? ''}`;
    if (shown !== this.#toldWidget || reportedFailure) {
      this.#toldWidget = shown;
      this.#deps.tellWidget?.();
    }
    this.#scheduler.setHeartbeatMs(answer.heartbeat_ms);
    if (answer.controls) this.#controls = answer.controls;
    // an operator turned incoming calls on or off: the device registers, or lets its registration go
    if (answer.inbound !== undefined) {
      this.#driver?.setRegistration(answer.inbound);
      this.#nodesTakeRegistered = true;
    }
    const hangupDoubt = this.#callProblem?.kind === 'hangup' ? this.#callProblem.callId : undefined;
    // The server no longer lists as live the call a hang-up may not have ended: it is over after all.
    if (hangupDoubt !== undefined && !(answer.call?.call_id === hangupDoubt && LIVE_STATUSES.includes(answer.call.status))) this.#setCallProblem(null);
    if (epoch === this.#epoch && this.#calls.reconcile(answer.call, this.#deps.now())) this.#afterCallChange();
    if (epoch === this.#epoch) this.#checkLostLeg(answer.call, sent.graceOverFor);
    await this.#onWork(answer.commands, answer.dial_requests, false);
  }

  /**
   * Commands and dial requests, from a push or a heartbeat answer. Every delivery is acked on the
   * socket when it is up; the results also ride the next heartbeat until the server confirms them.
   * A heartbeat goes out at once only when it has something to say or learn: a push with no
   * commands (the server's nudge: a call rings for this window, say), a command that changed the
   * mute state or the call (REPORTED_KINDS), results the socket did not take. A `focus` acked on
   * the socket costs the server no heartbeat.
   */
  async #onWork(commands: EngineCommand[], dialRequests: HeartbeatResponse['dial_requests'], pushed: boolean): Promise<void> {
    if (this.#stopped) return;
    const fresh = commands.filter((command) => !this.#runner.has(command.command_id));
    const { acks } = await this.#runner.deliver(commands);
    const reported = fresh.some((command) => REPORTED_KINDS.has(command.kind));
    const socket = this.#socket;
    const onSocket = acks.length > 0 && socket?.connected === true;
    if (onSocket) {
      void socket!.ack(acks).then((ok) => {
        // not taken: the results ride a heartbeat, now
        if (!ok) return void this.#scheduler.beat();
        this.#runner.confirm(acks);
        if (acks.some((ack) => ack.result === 'failed')) this.#deps.tellWidget?.();
        // The server has applied the commands' effects (a simulated answer, say): ask how the call is now.
        if (reported) void this.#scheduler.beat();
      });
    }
    void this.#dialer.offer(dialRequests);
    if ((pushed && commands.length === 0) || reported || (fresh.length > 0 && !onSocket)) void this.#scheduler.beat();
    this.#changed();
  }

  #execute(command: EngineCommand): Promise<void> {
    return carryOut(command, {
      driver: this.#driver,
      heldCallId: this.#calls.reportId,
      ringingCallId: this.#ringingRef,
      focus: () => this.#deps.focus(),
      setMuted: (muted) => {
        this.#muted = muted;
      },
      takenHere: this.#takenHere,
      taking: (callId) => {
        this.#takenHere = callId;
        this.#changed();
      },
      answered: (callId) => this.#tookCall(callId),
      letGoRinging: () => {
        this.#ringingRef = null;
      },
    });
  }

  /** A claim won: show the call, report it at once, and connect the voice driver. */
  async #take(claimed: Claimed): Promise<void> {
    this.#epoch += 1;
    this.#forgetLostLeg();
    this.#setCallProblem(null);
    this.#calls.update(claimed.call, this.#deps.now());
    this.#afterCallChange();
    try {
      await this.#driver!.connect(claimed.connect.params);
    } catch (error) {
      await this.#abandon(claimed.call.call_id, `${MESSAGES.connectFailed} ${text(error)}`);
    }
  }

  /**
   * A claimed call whose voice leg never got up (connect refused it, or the device could not open
   * the microphone: the voice SDK opens it after connect resolves, before the provider hears of the
   * call): the window says why and has the server end it at once. Left alone, it would stay
   * `claimed`, the agent busy and the widget showing Connecting…, until the server's connect timeout.
   * A leg that ended for another reason may have reached the provider, whose outcome (busy, failed)
   * the server is about to record: that one is ended only if the server still has it `claimed`
   * LEG_LOST_GRACE_MS later (#checkLostLeg).
   */
  async #abandon(callId: string, why: string): Promise<void> {
    this.#setCallProblem(why, 'connect');
    this.#changed();
    const answer = await this.#deps.api.hangup(callId).catch(() => null);
    // By the time the server answers, the window may hold the next call, which this must not end.
    const held = this.#calls.current;
    if (held && held.call.call_id !== callId) return;
    if (answer?.call) this.#calls.update(answer.call, this.#deps.now());
    else this.#calls.end(this.#deps.now());
    this.#afterCallChange();
  }

  /** A claimed call's voice leg ended before it connected: the window asks the server, after the grace, what became of it. */
  #lostLeg(callId: string): void {
    this.#forgetLostLeg();
    // Judged by the timer, not by comparing clock readings: a heartbeat sent after it fired answers.
    const lost: LostLeg = {
      callId,
      graceOver: false,
      check: systemTimers.after(LEG_LOST_GRACE_MS, () => {
        lost.graceOver = true;
        void this.#scheduler.beat();
      }),
    };
    this.#legLost = lost;
  }

  #forgetLostLeg(): void {
    if (this.#legLost) systemTimers.cancel(this.#legLost.check);
    this.#legLost = null;
  }

  /**
   * What the server says of a lost leg's call: another call or none, or the call no longer
   * `claimed` (the provider reached it, or it ended), and it is the server's; still `claimed` in a
   * heartbeat sent past the grace (an answer's state is as of its report, however late it comes),
   * the provider never heard of it, and the window has it ended (#abandon).
   */
  #checkLostLeg(call: HeartbeatResponse['call'], graceOverFor: string | null): void {
    const lost = this.#legLost;
    if (!lost) return;
    if (call?.call_id !== lost.callId || call.status !== 'claimed') return this.#forgetLostLeg();
    if (graceOverFor !== lost.callId) return;
    this.#forgetLostLeg();
    void this.#abandon(lost.callId, MESSAGES.connectFailed);
  }

  #onDriver(event: DriverEvent): void {
    // The device's own error (a signalling hiccup it recovers from by itself) is said until the
    // device next shows it works (a call rings, connects), not for the hour until the next voice
    // token. Not when a call ends: a call that fails ends right behind its error, which would be
    // wiped before anyone read why.
    if (event.type === 'registered') {
      if (this.#problems.voice === this.#unregistered) this.#problems.voice = null;
      this.#unregistered = null;
    }
    if (WORKING_EVENTS.has(event.type) && this.#deviceError !== null && this.#problems.voice === this.#deviceError) {
      this.#problems.voice = this.#unregistered;
      this.#deviceError = null;
    }
    switch (event.type) {
      case 'incoming':
        this.#ringingRef = event.ref;
        this.#forgetLostLeg(); // the device has another leg: a later mic-failed is that one's
        break;
      case 'accepted':
        this.#ringingRef = null;
        this.#forgetLostLeg();
        break;
      case 'muted':
        this.#muted = event.muted;
        break;
      case 'disconnected': {
        this.#ringingRef = null;
        const held = this.#calls.current;
        const unconnected = held && !held.ended && held.call.status === 'claimed' ? held.call.call_id : null;
        // The device's leg is gone: this window no longer holds the call, whatever comes later.
        if (this.#calls.end(this.#deps.now(), true)) this.#afterCallChange();
        if (unconnected) this.#lostLeg(unconnected);
        break;
      }
      case 'mic-failed': {
        // The device could not open the microphone for a call: ask the browser again, which says
        // why (blocked, missing, in use) and keeps the window not ready meanwhile, so no call rings
        // an agent who cannot speak; the agent frees or allows it and clicks Try again. A claimed
        // call it was placing never reached the provider: the server ends it now (#abandon).
        // (@twilio/voice-sdk ends the leg, then says why; the driver says it only of its own legs)
        const held = this.#calls.current;
        const live = held && !held.ended ? held.call : null;
        const unconnected = live ? (live.status === 'claimed' ? live.call_id : null) : (this.#legLost?.callId ?? null);
        this.#forgetLostLeg();
        if (unconnected) void this.#abandon(unconnected, MESSAGES.connectFailed);
        void this.retryMic();
        return;
      }
      case 'token-expiring':
        void this.#voice.refresh();
        return;
      case 'unregistered':
        // reported at once (the heartbeat below), so the server routes no incoming call to a device
        // that cannot ring until it is registered again (`registered` follows)
        break;
      case 'error': {
        const text = voiceErrorText(event);
        this.#problems.voice = text;
        if (event.lasting) this.#unregistered = text;
        else this.#deviceError = text;
        break;
      }
    }
    this.#changed();
    void this.#scheduler.beat();
  }

  /** Says (or, with null, stops saying) what went wrong with a call, and what it is about. */
  #setCallProblem(message: string | null, kind: 'device' | 'hangup' | 'connect' = 'device'): void {
    this.#problems.call = message;
    this.#callProblem = message === null ? null : { kind, callId: this.#calls.reportId ?? this.#calls.current?.call.call_id ?? null };
  }

  #afterCallChange(): void {
    const held = this.#calls.reportId;
    // The server says the call is over (its final status, or the window's hang-up): the device's
    // leg goes too, if the provider's end has not reached it (else the agent could stay on the
    // line with no Hang up anywhere, and the next claim find the device still on a call).
    if (this.#lastHeld !== null && held === null) this.#letGoOfDevice();
    const changed = held !== this.#lastHeld;
    if (changed) {
      const about = this.#callProblem;
      if (about && (held !== null ? about.callId !== held : about.kind === 'device')) this.#setCallProblem(null);
      this.#lastHeld = held;
    }
    const onCall = held !== null;
    // Mute belongs to the call it was set on: the next one starts unmuted, even when it follows at
    // once (the device's new call is not muted, and the window must not say it is).
    if (!onCall || changed) this.#muted = false;
    this.#scheduler.setOnCall(onCall);
    this.#changed();
    void this.#scheduler.beat();
  }

  /**
   * Ends the device's legs, ringing ones included. The driver says nothing of a leg it was told
   * to let go, so what rang is forgotten here: an answer that comes before the next call's ring
   * is checked against that call, not against the one let go.
   */
  #letGoOfDevice(): void {
    this.#ringingRef = null;
    this.#driver?.disconnect();
  }

  #setSocket(up: boolean): void {
    this.#socketUp = up;
    this.#scheduler.setSocketUp(up);
    if (up) void this.#scheduler.beat();
    this.#changed();
  }

  /** A final end (socket `ended` final, or a refusal that will not change): stop, say why, never reconnect. */
  #stop(code: string, message: string): void {
    if (this.#stopped) return;
    if (code === 'replaced' || code === 'unauthorized') forgetPairing(this.#deps.storage);
    this.#problems.final = finalMessage(code) ?? message;
    this.#halt();
    // released: nothing that comes later (an answer already on its way) shows it again
    this.#calls.end(this.#deps.now(), true);
    this.#changed();
  }

  #halt(): void {
    this.#stopped = true;
    this.#nudgedBeat.cancel();
    this.#forgetLostLeg();
    this.#scheduler.stop();
    this.#deps.ticker.destroy();
    this.#socket?.stop();
    this.#dialer.stop();
    this.#driver?.destroy();
  }

  #changed(): void {
    const model = this.model();
    for (const listener of [...this.#listeners]) listener(model);
  }
}
