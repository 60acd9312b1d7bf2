/**
 * One widget instance: the session, the transport, the state machine and the panel, glued
 * together. Every input change (a snapshot, the session, the transport, a local effect) ends in
 * update(), which derives the state, emits statechange and renders.
 */
import { LIMITS } from '../../shared/limits.js';
import { CallWatch } from './call-watch.js';
import { sendCommand, ACK_TIMEOUT_MS, CommandOrder, SESSION_WAIT_MS, noSessionInTime } from './commands.js';
import { isLive, type Call, type Command, type CommandKind, type CommandResult, type Engine, type FailedCommand, type IntegratorSession, type LaunchTicket, type WidgetState } from './contract.js';
import { within } from './deadline.js';
import { EFFECT_MS, LocalEffects } from './effects.js';
import { Emitter } from './emitter.js';
import { SdkError, isFatal, isRejection, postIntegrator, widgetApi, type FetchLike } from './http.js';
import { LaunchTracker, launchCallWindow, openedMode, type WindowOpener } from './launcher.js';
import { StateMachine } from './machine.js';
import { SessionKeeper } from './session.js';
import { Snapshots } from './snapshots.js';
import { newRequestId, type Clock, type TimerHandle } from './timing.js';
import { Transport, type SocketFactory } from './transport.js';
import type { CallParams, InitOptions, PublicState, SdkEvents } from './types.js';
import { langOf, textsFor, type Texts } from './ui/texts.js';
import { Widget, type Position } from './ui/widget.js';

export interface ClientDeps {
  fetch: FetchLike;
  io: SocketFactory;
  clock: Clock;
  open: WindowOpener;
  storage: Pick<Storage, 'getItem' | 'setItem'> | null;
  /** the page's origin, posted to sessionEndpoint */
  origin: string;
  /** the SDK script's origin, for the default apiBaseUrl */
  scriptOrigin: string | null;
  /** where the SDK warns the integrator's developers (default console.warn) */
  warn?: (message: string) => void;
}

const MESSAGE_MS = 10_000;
/** The fastest the widget polls, whatever a state says: a 0 (a misconfigured node, a proxy's rewrite) would poll in a tight loop. */
export const MIN_POLL_MS = 1000;
const pollInterval = (pollMs: number | undefined) => (typeof pollMs === 'number' && Number.isFinite(pollMs) ? Math.max(MIN_POLL_MS, pollMs) : LIMITS.pollMs);
/**
 * How long requestCall() waits for the integrator's requestCallEndpoint, which itself calls the
 * service. Longer than other requests: it is not retried, and the backend may be slow to look up
 * the number; as long as the wait for the call to appear, after which it is reported anyway.
 */
const REQUEST_CALL_TIMEOUT_MS = LIMITS.callStartWaitSeconds * 1000;
const DIGITS = /^[0-9*#w]{1,32}$/;
const noSession = () => new SdkError('unauthorized', 'There is no widget session.');
/** A command made for one agent, when the session is now another's (another user signed in on this browser). */
const agentChanged = () => new SdkError('agent_changed', 'The widget now serves another agent: the command was not sent for them.', 409);

export class Click2CallWidget extends Emitter<SdkEvents> {
  private readonly machine = new StateMachine();
  private readonly snapshots: Snapshots;
  private readonly session: SessionKeeper;
  private readonly transport: Transport;
  private readonly api: ReturnType<typeof widgetApi>;
  private readonly effects: LocalEffects;
  private readonly callWatch: CallWatch;
  private readonly launch: LaunchTracker;
  private widget: Widget | null = null;
  private shown = { language: '', position: '' };
  /** whether the integration's widget defaults were taken once (later changes wait for a call's end) */
  private adoptedDefaults = false;
  /** what the panel says (`said` counts each time it is said: the same words again are spoken again) */
  private message: { text: string; until: number; said: number } | null = null;
  private sayings = 0;
  /** why the session is over has been said: it stays, whatever a click on the stopped widget is refused for after it */
  private overSaid = false;
  /** the call window's address with its ticket, offered as a link when the popup was blocked, until the ticket expires (clock ms) */
  private openTab: { url: string; name: string; until: number } | null = null;
  private focusFallbackAt = -Infinity;
  private callKey = '';
  private liveCallId: string | null = null;
  private tickTimer: TimerHandle | undefined;
  private started = false;
  private detached = false;
  private transportStarted = false;
  private readonly warned = new Set<string>();
  /** the call window this page opened or found, which window messages go to and come from */
  private callWindow: Window | null = null;
  /** a call window's name its ticket gave before anything named the agent (rememberWindowName) */
  private unkeptWindowName: string | null = null;
  /** counts the agents this widget has served: what was begun for one (a launch, a command) is not carried out for the next */
  private agentEra = 0;
  /** endSession() was called: the session is over, its revoke perhaps still on its way */
  private ending = false;
  /**
   * Commands sent that a call window has yet to carry out, by request_id: their kind, what undoes
   * their effect, and (`failed`) the window's failure once WidgetState.failed_command reported it.
   */
  private readonly order: CommandOrder;
  private readonly awaiting = new Map<string, { kind: CommandKind; revert?: () => void; until: number; failed?: SdkError; settled?: boolean }>();

  constructor(
    readonly options: InitOptions,
    private readonly d: ClientDeps,
  ) {
    super();
    const clock = d.clock;
    const now = () => clock.now();
    this.snapshots = new Snapshots(now);
    this.effects = new LocalEffects(now);
    this.callWatch = new CallWatch(clock, () => this.say(this.t.didNotStart, 3 * MESSAGE_MS, true));
    this.launch = new LaunchTracker(clock, () => this.update());
    const base = options.apiBaseUrl ?? (d.scriptOrigin ? d.scriptOrigin + '/api/v1/click2call' : '');
    const api = widgetApi(d.fetch, base, () => this.session.token, clock);
    // platform_disabled from any request is final (docs/sdk.md), whichever request heard it: a
    // command's or a launch ticket's as much as a poll's
    this.api = async <T>(...args: Parameters<typeof api>) => {
      try {
        return await api<T>(...args);
      } catch (error) {
        if (isFatal(error)) this.session.abort(error as SdkError);
        throw error;
      }
    };
    this.order = new CommandOrder(clock, () => !this.detached);
    this.session = new SessionKeeper({
      fetch: d.fetch,
      clock,
      integrationId: options.integrationId,
      sessionEndpoint: options.sessionEndpoint,
      headers: options.headers ?? {},
      origin: d.origin,
      refreshCall: () => this.api('POST', '/widget/refresh'),
      serverNowMs: () => this.snapshots.serverNowMs(),
      onStatus: (status, error) => {
        if (error) {
          this.say(this.errorText(error), 0);
          this.overSaid = true;
        }
        // Over for this instance: nothing more to poll or push.
        if (status === 'unauthorized' || status === 'error') this.stopAll();
        this.update();
      },
      onToken: (session) => {
        if (session && this.transportStarted) this.startOver(session);
        if (session) this.adoptDefaults();
        if (this.transportStarted) return this.transport.reconnect();
        this.transportStarted = true;
        this.transport.start(session?.realtime ?? null);
      },
    });
    this.transport = new Transport({
      clock,
      io: d.io,
      session: this.session,
      getState: (etag) => this.api<WidgetState>('GET', '/widget/state', undefined, etag ? { 'if-none-match': etag } : {}),
      onSnapshot: (state, polled) => this.onSnapshot(state, polled),
      onStatus: () => this.update(),
      pollMs: () => pollInterval(this.snapshots.state?.poll_ms),
    });
  }

  /** Mounts the widget and asks for the session. Called by init(). */
  start(): this {
    if (this.started) return this;
    this.started = true;
    this.mount(this.options.language, this.options.position);
    const { integrationId, sessionEndpoint, apiBaseUrl } = this.options;
    const problem = !integrationId || !sessionEndpoint
      ? 'init() needs integrationId and sessionEndpoint.'
      : !apiBaseUrl && !this.d.scriptOrigin ? 'apiBaseUrl is required when the SDK is not loaded from a <script src>.' : null;
    if (problem) {
      this.say(problem, 0);
      this.session.status = 'error';
    } else void this.session.start();
    if (typeof window !== 'undefined') window.addEventListener('message', this.onWindowMessage);
    this.update();
    return this;
  }

  // ——— public API ———

  getState(): PublicState {
    const st = this.snapshots.state;
    return {
      state: this.machine.state,
      engine: this.engineView(),
      call: st?.call ?? null,
      policy: st?.policy ?? this.session.session?.policy ?? null,
      agent: st?.agent ?? this.session.session?.agent ?? null,
      session: { expires_at: this.session.expiresAt ?? st?.session_expires_at ?? null },
    };
  }

  /** Opens the call window (inside a user gesture), or brings the live one forward. */
  enableCalls(): boolean {
    // A session that is over (logged out, refused for good) gets no window: the widget says why.
    if (this.detached || this.sessionOver()) return false;
    this.openTab = null;
    const agentEra = this.agentEra;
    const opened = launchCallWindow({
      open: this.d.open,
      storage: this.d.storage,
      storageKey: () => this.windowKey(),
      heldWindow: this.callWindow,
      windowMode: openedMode(this.options.windowMode, (this.snapshots.state?.policy ?? this.session.session?.policy)?.widget?.window_mode, (message) => this.warnOnce(message)),
      engineLive: !!this.engineView()?.live,
      launchedAt: this.launch.startedAt(),
      launchingWindow: this.launch.window(),
      now: this.d.clock.now(),
      fallbackAt: this.focusFallbackAt,
      onFallback: (at) => {
        this.focusFallbackAt = at;
        this.say(this.t.elsewhere);
      },
      ticket: () => this.ticket(),
      cancelled: () => this.detached || this.sessionOver() || this.agentEra !== agentEra,
      focusCommand: () => void this.command('focus').catch(() => {}),
      onNamed: (name) => this.rememberWindowName(name),
      onWindow: (win) => void (this.callWindow = win),
      onLaunching: (win) => {
        this.message = null;
        this.launch.start(win);
      },
      onBlocked: (ticket) => {
        // The link carries the ticket: once that has expired, the window it opens could only say so.
        const ttl = ticket.expires_in * 1000;
        this.openTab = { url: ticket.window_url, name: ticket.window_name, until: this.d.clock.now() + ttl };
        this.say(this.t.popupBlocked, ttl, true);
      },
      onError: (error) => {
        this.launch.stop();
        this.say(this.errorText(error), MESSAGE_MS, true);
      },
    });
    this.update();
    return opened;
  }

  /** Asks the integrator's backend for an outgoing call; resolves with its JSON. */
  async requestCall(params: CallParams = {}): Promise<unknown> {
    if (this.detached) throw new SdkError('detached', 'The widget is detached.');
    if (!this.options.requestCallEndpoint) throw new SdkError('invalid_options', 'requestCallEndpoint is not set.');
    if (!sendableParams(params)) throw new SdkError('invalid_request', 'requestCall() takes an object that JSON can carry (no BigInt, no cycles).');
    const previous = this.snapshots.state?.call?.request_id ?? null;
    let body: any;
    try {
      const bound = { clock: this.d.clock, ms: REQUEST_CALL_TIMEOUT_MS };
      body = (await postIntegrator(this.d.fetch, this.options.requestCallEndpoint, params, this.options.headers ?? {}, bound)).body ?? { ok: true };
    } catch (error) {
      const e = error as SdkError;
      // An error status is a refusal even when its body is not the envelope (a CRM's own 419
      // {"message": "CSRF token mismatch."}): taken for a success, it would say nothing now and
      // "The call did not start" 30 s later. Its own fields stay; ok, error and message are made
      // sure. A 5xx answered is http_5xx: `unreachable` is for no answer at all.
      const own = e.body && typeof e.body === 'object' && !Array.isArray(e.body) ? (e.body as Record<string, unknown>) : {};
      const code = e.code === 'unreachable' && e.status ? `http_${e.status}` : e.code;
      body = { ...own, ok: false, error: typeof own.error === 'string' ? own.error : code, message: typeof own.message === 'string' ? own.message : e.message };
    }
    this.emit('callrequested', body);
    // Detached or logged out meanwhile: nothing left to show it in, or to watch for the call.
    if (this.detached || this.sessionOver()) return body;
    if (body?.ok === false) this.say(this.errorText(new SdkError(String(body.error), String(body.message ?? body.error))));
    else this.callWatch.start(typeof body?.request_id === 'string' ? body.request_id : null, previous, this.snapshots.state?.call ?? null);
    this.update();
    return body;
  }

  answer(): Promise<CommandResult> {
    return this.command('answer', {}, () => this.effects.pend('answering', this.snapshots.state?.call));
  }

  decline(): Promise<CommandResult> {
    return this.command('decline', {}, () => this.effects.pend('ending', this.snapshots.state?.call));
  }

  /** Ends the call server-side: works from any page, also when the window lost the call or is gone. */
  hangup(): Promise<CommandResult> {
    return this.command('hangup', {}, () => this.effects.pend('ending', this.snapshots.state?.call));
  }

  setMuted(muted: boolean): Promise<CommandResult> {
    // a string 'false' is truthy: it would mute the agent
    if (typeof muted !== 'boolean') return this.refuseLocally('mute', 'invalid_request', 'setMuted() takes true or false.');
    const kind = muted ? 'mute' : 'unmute';
    if (muted && !this.allows('mute')) return this.refuseLocally(kind, 'control_not_allowed', 'The policy does not enable mute.');
    return this.command(kind, {}, () => this.effects.flag('muted', muted));
  }

  sendDigits(digits: string): Promise<CommandResult> {
    // the call's own mistake first, as for setMuted: the policy may allow dtmf tomorrow, and the call would still be wrong
    if (typeof digits !== 'string' || !DIGITS.test(digits)) return this.refuseLocally('dtmf', 'invalid_request', 'digits may contain 0-9, * and # (at most 32).');
    if (!this.allows('dtmf')) return this.refuseLocally('dtmf', 'control_not_allowed', 'The policy does not enable dtmf.');
    return this.command('dtmf', { digits });
  }

  setAvailability(available: boolean): Promise<CommandResult> {
    if (typeof available !== 'boolean') return this.refuseLocally('availability', 'invalid_request', 'setAvailability() takes true or false.');
    return this.command('availability', { available }, () => this.effects.flag('available', available));
  }

  /** Stops polling and the socket and removes the widget. Not a hangup. */
  detach(): void {
    if (this.detached) return;
    this.stopAll();
    this.detached = true;
    this.widget?.destroy();
    this.widget = null;
    this.emit('detached', undefined);
  }

  /** Revokes this widget session (for logout); the call window keeps its own session. */
  async endSession(): Promise<unknown> {
    const asking = this.session.asking;
    // over from now, not once the revoke is answered: a call answered meanwhile starts no watch, a click opens no window
    this.ending = true;
    this.stopAll();
    this.update(); // the 'Open in new tab' link goes at once, not once the revoke is answered
    // A session still being asked for is revoked too, once its token arrives (within the request's time limit).
    if (asking) await asking.catch(() => {});
    const hadToken = this.session.token !== null;
    let body: unknown = { ok: true };
    if (hadToken) {
      try {
        body = (await this.api('POST', '/widget/revoke')).body;
      } catch (error) {
        const e = error as SdkError;
        body = e.body ?? { ok: false, error: e.code, message: e.message };
      }
    }
    this.session.status = 'unauthorized';
    this.update();
    return body;
  }

  // ——— commands ———

  private async command(kind: CommandKind, extra: Partial<Command> = {}, effect?: () => () => void): Promise<CommandResult> {
    // reported like any refusal (commandfailed): a page may still listen after detach()
    if (this.detached) return this.refuseLocally(kind, 'detached', 'The widget is detached.');
    const command: Command = { kind, request_id: newRequestId(), ...extra };
    const call = this.snapshots.state?.call;
    // Act on the call the agent sees, never on a newer one.
    if (isLive(call) && kind !== 'availability' && kind !== 'focus') command.ref = call.request_id;
    const revert = effect?.();
    this.update();
    // Until the window has carried it out, it may yet report it could not (WidgetState.failed_command).
    this.awaiting.set(command.request_id, { kind, revert, until: this.d.clock.now() + EFFECT_MS });
    // A session the command waits for comes in time or the command is dropped (SESSION_WAIT_MS).
    const inTime = <T>(waiting: Promise<T>) => within(this.d.clock, SESSION_WAIT_MS, waiting, () => noSessionInTime(kind));
    // Made for this agent: never sent, nor sent again, for another one whose session came meanwhile
    // (availability and focus name no call, so the service would carry them out for that agent).
    const era = this.agentEra;
    const forThisAgent = () => {
      if (this.agentEra !== era) throw agentChanged();
    };
    try {
      if (!(await inTime(this.session.ready()))) throw noSession();
      forThisAgent();
      const result = await this.order.run(kind, () =>
        sendCommand(command, {
          clock: this.d.clock,
          viaSocket: (c) => (forThisAgent(), this.transport.emitCommand(c, ACK_TIMEOUT_MS)),
          viaRest: (c) => (forThisAgent(), this.api<CommandResult>('POST', '/widget/commands', c, {}, ACK_TIMEOUT_MS, forThisAgent)),
          rejected: async (e) => {
            const renewed = await inTime(this.session.rejected(e));
            forThisAgent();
            return renewed;
          },
        }),
      );
      // The window's failure may be known before the command's own answer: it is the outcome.
      const failure = this.awaiting.get(command.request_id)?.failed;
      if (failure) throw failure;
      // done by the service itself (availability, a hangup): no window is left to fail it
      if (result.status === 'done') this.awaiting.delete(command.request_id);
      else this.nudgeWindow();
      return result;
    } catch (caught) {
      const reported = this.awaiting.get(command.request_id)?.failed !== undefined;
      this.awaiting.delete(command.request_id);
      revert?.();
      const error = caught instanceof SdkError ? caught : new SdkError('unreachable', String(caught));
      // one commandfailed per command, whichever learnt of its failure first
      if (!reported) this.fail(kind, error);
      throw error;
    } finally {
      const entry = this.awaiting.get(command.request_id);
      if (entry) entry.settled = true;
    }
  }

  private refuseLocally(kind: string, code: string, message: string): Promise<never> {
    const error = new SdkError(code, message);
    this.fail(kind, error);
    return Promise.reject(error);
  }

  private fail(kind: string, error: SdkError): void {
    this.emit('commandfailed', { kind, error: error.code, message: error.message });
    // the previous agent's command: the agent now shown did nothing to be told of
    if (error.code === 'agent_changed') return;
    this.say(this.errorText(error), error.code === 'hangup_uncertain' ? 0 : MESSAGE_MS, true);
  }

  /** Logged out (endSession), or refused for good: this instance serves no more (the widget says why). */
  private sessionOver(): boolean {
    return this.ending || this.session.status === 'unauthorized' || this.session.status === 'error';
  }

  private allows(control: 'mute' | 'dtmf'): boolean {
    const policy = this.snapshots.state?.policy ?? this.session.session?.policy;
    return !!policy && policy.controls.includes(control);
  }

  private async ticket(): Promise<LaunchTicket> {
    // The window waits blank meanwhile: it is closed, and the reason shown, once this is too long.
    const inTime = <T>(waiting: Promise<T>) => within(this.d.clock, SESSION_WAIT_MS, waiting, () => new SdkError('unreachable', 'No widget session in time to open the call window.'));
    if (!(await inTime(this.session.ready()))) throw noSession();
    // The window speaks the widget's language: it rides the fragment beside the ticket (never sent anywhere).
    const ask = async () => withLanguage((await this.api<LaunchTicket>('POST', '/widget/launch-ticket')).body!, this.shown.language);
    try {
      return await ask();
    } catch (error) {
      if (isRejection(error) && (await inTime(this.session.rejected(error as SdkError)))) return ask();
      throw error;
    }
  }

  /**
   * Where this integration and agent keep the call window's name (localStorage), or null while the
   * agent is not known: a sessionEndpoint may answer only widget_token and expires_at, and the
   * agent then comes with the first state. Worked out when needed, not when enableCalls() is
   * clicked, so that a click before the session answered still stores the name its ticket gives.
   */
  private windowKey(): string | null {
    const agent = (this.snapshots.state?.agent ?? this.session.session?.agent)?.identifier;
    return agent ? `c2c.window.${this.options.integrationId}.${agent}` : null;
  }

  /**
   * Keeps the call window's name for this agent (localStorage), so that a later enableCalls()
   * brings that window forward instead of opening a second one. A ticket that came before anything
   * named the agent (a sessionEndpoint answering only the token, the first state not yet in) is
   * kept when the first state names them.
   */
  private rememberWindowName(name: string | null): void {
    const key = this.windowKey();
    this.unkeptWindowName = key ? null : name;
    if (!key || !name) return;
    try {
      this.d.storage?.setItem(key, name);
    } catch {
      /* storage disabled: the next enableCalls cannot find this window by name */
    }
  }

  /**
   * A new session from sessionEndpoint after a rejected token: perhaps for another agent (another
   * user logged in on this browser meanwhile). The conditional poll starts afresh (its ETag was the
   * old session's), and the state held is dropped when the session names another agent: it is not
   * the new agent's to see (their call, their customer's name), and versions count per agent, so
   * the new agent's would not replace it. A session that does not name its agent (an integrator's
   * backend that passes on only the token) leaves that to the first state of another agent
   * (onSnapshot).
   */
  private startOver(session: IntegratorSession): void {
    this.transport.forgetEtag();
    // a name not yet kept was the previous token's agent's, who may not be the new session's
    this.unkeptWindowName = null;
    const held = this.snapshots.state?.agent?.identifier;
    const named = session.agent?.identifier;
    if (held && named && held !== named) this.forgetAgent();
  }

  /** What the widget held and did for the previous agent, dropped: the widget now serves another. */
  private forgetAgent(): void {
    this.agentEra += 1;
    this.snapshots.forget();
    // the call window is the other agent's: found again by the new agent's window name, if any
    this.callWindow = null;
    // and so is what the widget did for that agent: a window being paired, its 'Open in new tab'
    // link (a ticket of the old session), a requested call awaited, controls not yet confirmed
    this.launch.stop();
    this.openTab = null;
    this.callWatch.stop();
    this.effects.clear();
    this.message = null;
  }

  // ——— state ———

  /** The engine as the widget shows it: the snapshot's (the session's before any), with unconfirmed effects. */
  private engineView(): Engine | null {
    const st = this.snapshots.state;
    return this.effects.applyTo(st ? st.engine : (this.session.session?.engine ?? null));
  }

  private onSnapshot(state: WidgetState, polled = false): void {
    // after logout or a final refusal, nothing moves: no state, no event
    if (this.sessionOver()) return;
    const held = this.snapshots.state?.agent?.identifier;
    if (held && state.agent?.identifier && held !== state.agent.identifier) this.forgetAgent();
    if (!this.snapshots.offer(state, polled)) return;
    if (this.unkeptWindowName) this.rememberWindowName(this.unkeptWindowName);
    const { engine, call } = this.snapshots.state!;
    this.effects.confirm(engine, call);
    this.noticeWindowFailure(state.failed_command);
    if (engine?.state === 'ready') this.launch.stop();
    else if (engine?.live) this.launch.paired();
    if (this.openTab && engine?.live) this.openTab = null;
    this.callWatch.check(call);
    this.session.schedule(); // the server clock may have moved the refresh time
    this.adoptDefaults();
    this.update();
  }

  /**
   * A command of this widget that the call window could not carry out: reported as a refusal is
   * (commandfailed, the reason shown) and its effect undone at once, rather than left to time out.
   */
  private noticeWindowFailure(failed: FailedCommand | null | undefined): void {
    const now = this.d.clock.now();
    // an entry stays while its command is in flight, so that its answer knows a failure was reported
    for (const [id, entry] of this.awaiting) if (entry.until <= now && entry.settled) this.awaiting.delete(id);
    const entry = failed ? this.awaiting.get(failed.request_id) : undefined;
    if (!failed || !entry || entry.failed) return;
    // kept (marked) until the command's own answer, if it is still on its way, so as not to report it twice
    entry.failed = new SdkError('command_failed', failed.message, 409);
    entry.revert?.();
    this.fail(entry.kind, entry.failed);
  }

  /**
   * The spec's "window message nudge", widget to window: a command for the window is queued. While
   * this widget's socket is down the window's may be too, and it would see the command only at its
   * next heartbeat (3 s): told here, it heartbeats now. The message carries nothing but that.
   */
  private nudgeWindow(): void {
    const win = this.callWindow;
    if (!win || this.transport.pushing) return;
    try {
      if (!win.closed) win.postMessage({ c2c: 'nudge' }, '*');
    } catch {
      /* the window went away */
    }
  }

  /** ...and window to widget: the agent's state moved; a widget that polls polls now. */
  private readonly onWindowMessage = (event: MessageEvent): void => {
    if (!event.source || event.source !== this.callWindow) return;
    if ((event.data as { c2c?: unknown } | null)?.c2c === 'changed') this.transport.pollNow();
  };

  private stopAll(): void {
    if (typeof window !== 'undefined') window.removeEventListener('message', this.onWindowMessage);
    this.transport.stop();
    this.session.stop();
    this.launch.stop();
    this.callWatch.stop();
    this.d.clock.cancel(this.tickTimer);
    // its ticket would pair a window for a session that is over: the window could only be refused
    this.openTab = null;
  }

  private update(): void {
    if (this.detached || !this.started) return;
    const now = this.d.clock.now();
    if (this.message && this.message.until <= now) this.message = null;
    if (this.openTab && this.openTab.until <= now) this.openTab = null;
    this.effects.expire();
    const st = this.snapshots.state;
    const call = st?.call ?? null;
    const engine = this.engineView();
    const launching = this.launch.isActive();
    this.noticeCallEnd(call);
    // hasSnapshot: one was ever applied (a new agent's session drops the held one, but the widget is not starting over)
    const inbound = (st?.policy ?? this.session.session?.policy)?.inbound ?? true;
    const moved = this.machine.update({ session: this.session.status, transport: this.transport.status, hasSnapshot: this.snapshots.seen, engine, call, launching, inbound });
    const key = call ? `${call.request_id}:${call.status}:${call.orphaned}` : '';
    if ((moved && !moved.refused) || key !== this.callKey) {
      this.callKey = key;
      this.emit('statechange', { state: this.machine.state, call });
    }
    this.widget?.render({
      state: this.machine.state,
      call,
      engine,
      policy: st?.policy ?? this.session.session?.policy ?? null,
      pending: this.effects.pending,
      duration: this.snapshots.durationOf(call),
      message: this.message?.text ?? null,
      said: this.message?.said ?? 0,
      openTab: this.openTab && { url: this.openTab.url, name: this.openTab.name },
    });
    // Tick while something on screen depends on time: the call timer, a message, an effect, a launch.
    this.d.clock.cancel(this.tickTimer);
    this.tickTimer = undefined;
    // A session that is over shows no call: its timer does not tick (the state may still hold a live call).
    const over = this.session.status === 'unauthorized' || this.session.status === 'error';
    const timed = (!over && isLive(call) && call.answered_at !== null) || (this.message && this.message.until !== Infinity) || this.effects.active || launching;
    if (timed) this.tickTimer = this.d.clock.after(1000 - (now % 1000) || 1000, () => this.update());
  }

  /** When the call the widget showed ends, it says how, for a moment. */
  private noticeCallEnd(call: Call | null): void {
    const live = isLive(call) ? call.request_id : null;
    if (this.liveCallId && live !== this.liveCallId && call?.request_id === this.liveCallId) this.say(this.t.calls[call.status]);
    this.liveCallId = live;
  }

  // ——— the panel ———

  private get t(): Texts {
    // before the widget is mounted (init() in <head>), the language it will speak if none is chosen
    return this.widget?.texts ?? textsFor(this.options.language ?? pageLanguage());
  }

  private warnOnce(message: string): void {
    if (this.warned.has(message)) return;
    this.warned.add(message);
    (this.d.warn ?? console.warn)(message);
  }

  private say(text: string, ttl = MESSAGE_MS, render = false): void {
    // A refusal after the session is over is told by its promise and commandfailed, not over why.
    if (this.overSaid) return;
    this.sayings += 1;
    this.message = { text, until: ttl ? this.d.clock.now() + ttl : Infinity, said: this.sayings };
    if (render) this.update();
  }

  /** What the agent reads for a refusal, in the widget's language (the service's own message stays in events and promises). */
  private errorText(error: SdkError): string {
    // the window's own reason, after what it means
    if (error.code === 'command_failed') return `${this.t.errors.command_failed}: ${error.message}`;
    const errors: Record<string, string> = this.t.errors;
    if (Object.hasOwn(errors, error.code)) return errors[error.code]!;
    // Not the service's (an integrator endpoint's answer, a set-up mistake): its detail is for the developer.
    this.warnOnce(`ServiceClick2Call: ${error.code}: ${error.message}`);
    return this.t.unexpected;
  }

  private mount(language: string | undefined, position: Position | undefined): void {
    if (typeof document === 'undefined') return;
    const onPage = !this.options.container || onPageBody(this.options.container);
    if (onPage && !document.body) {
      // init() ran in <head>: the session starts now, the widget appears with the body.
      document.addEventListener('DOMContentLoaded', () => {
        if (this.detached || this.widget) return;
        this.mount(language, position);
        this.adoptDefaults();
        this.update();
      }, { once: true });
      return;
    }
    this.widget?.destroy();
    const lang = language ?? pageLanguage();
    this.shown = { language: langOf(lang), position: position ?? 'bottom-right' };
    this.widget = new Widget(onPage ? document.body : this.options.container!, position ?? 'bottom-right', lang, this.handlers, onPage);
  }

  /**
   * The integration's widget defaults (language, position), used where init() did not choose: from
   * the session, or from the state when a trimmed session answer left them out (or they changed).
   */
  private adoptDefaults(): void {
    const defaults = this.snapshots.state?.policy?.widget ?? this.session.session?.policy?.widget;
    if (!defaults || !this.widget) return;
    // Rebuilt during a call, the widget would take the agent's keyboard focus away, close the keypad
    // and announce the call again: an operator's change of the defaults waits for the call's end.
    if (this.adoptedDefaults && isLive(this.snapshots.state?.call ?? null)) return;
    this.adoptedDefaults = true;
    // An integration whose operator chose no language (`page`; null from an earlier release) leaves it to the page.
    const language = this.options.language ?? (defaults.language === 'page' ? undefined : defaults.language) ?? undefined;
    const position = this.options.position ?? defaults.position;
    if (langOf(language ?? pageLanguage()) !== this.shown.language || position !== this.shown.position) this.mount(language, position);
  }

  private readonly handlers = {
    enable: () => void this.enableCalls(),
    answer: () => void this.answer().catch(() => {}),
    decline: () => void this.decline().catch(() => {}),
    hangup: () => void this.hangup().catch(() => {}),
    mute: (muted: boolean) => void this.setMuted(muted).catch(() => {}),
    digit: (digit: string) => void this.sendDigits(digit).catch(() => {}),
    available: (available: boolean) => void this.setAvailability(available).catch(() => {}),
    openTab: () => {
      // its ticket would pair a window for a session that is over (a logout under way included)
      if (this.sessionOver()) return false;
      // The link's ticket is single-use: once followed, the window is on its way.
      this.openTab = null;
      this.message = null;
      this.launch.start(null);
      this.update();
      return true;
    },
  };
}

/** Whether requestCall()'s params are an object JSON can carry (a BigInt or a cycle makes JSON.stringify throw). */
function sendableParams(params: unknown): boolean {
  if (typeof params !== 'object' || params === null || Array.isArray(params)) return false;
  try {
    JSON.stringify(params);
    return true;
  } catch {
    return false;
  }
}

/** The page's body given as the container: the widget is fixed in its corner there, as when none is given. */
export function onPageBody(container: HTMLElement): boolean {
  return typeof document !== 'undefined' && container === document.body;
}

/** The language the page says it is in (`<html lang>`), if it says. */
function pageLanguage(): string | undefined {
  return (typeof document !== 'undefined' && document.documentElement.lang) || undefined;
}

/** The launch ticket's window_url with the widget's language beside the ticket in its fragment (`#ticket=…&lang=fr`). */
function withLanguage(ticket: LaunchTicket, language: string): LaunchTicket {
  if (!ticket?.window_url?.includes('#')) return ticket;
  return { ...ticket, window_url: `${ticket.window_url}&lang=${encodeURIComponent(language)}` };
}
