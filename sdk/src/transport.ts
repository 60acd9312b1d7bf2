/**
 * How snapshots reach the SDK: push over Socket.IO (the gateway sends the whole state on every
 * connect and every change), and GET /widget/state every poll_ms with If-None-Match while the
 * socket is down or the service has no gateway, and every LIVE_CHECK_MS or so while it is up
 * (pushes are best-effort; see there). Endings are acted on as the gateway classifies
 * them: final (stop; unauthorized → ask the session again; platform_disabled → error) or not
 * (reconnect with full-jitter backoff, with a fresh token after token_expired).
 */
import type { Command, CommandResult, ErrorEnvelope, Realtime, SocketEnd, WidgetState } from './contract.js';
import { SdkError, isFatal, isRejection, isTransient, type HttpAnswer } from './http.js';
import type { TransportStatus } from './machine.js';
import type { SessionKeeper } from './session.js';
import { NUDGE_MIN_MS, retryAfterMs } from '../../shared/events.js';
import { SocketDoubt } from '../../shared/socket-doubt.js';
import { spaced } from '../../shared/spaced.js';
import { reconnectWait } from '../../shared/backoff.js';
import { spreadWait, type Clock, type TimerHandle } from './timing.js';

/** The part of a socket.io-client Socket the SDK uses (tests pass a fake). */
export interface MiniSocket {
  readonly connected: boolean;
  /** socket.io-client's Manager: it says when anything arrives on the connection, pings included */
  readonly io?: { on(event: 'ping' | 'packet', fn: () => void): unknown };
  on(event: string, fn: (...args: any[]) => void): unknown;
  connect(): unknown;
  disconnect(): unknown;
  timeout(ms: number): { emit(event: string, payload: unknown, ack: (err: Error | null, reply: unknown) => void): unknown };
}

export type SocketFactory = (url: string, options: Record<string, unknown>) => MiniSocket;

/**
 * A socket proves healthy by carrying its state and staying up this long (a server ping interval):
 * only then does its reconnect backoff start again from the base. One the server or a proxy drops
 * right after the handshake (a node that cannot read the state, say) would otherwise be
 * reconnected every half second for as long as that lasts.
 */
export const SOCKET_HEALTHY_MS = 10_000;

/** The socket's reconnect backoff: full jitter from half a second, doubling to 30 s. */
const SOCKET_BACKOFF = { baseMs: 500, capMs: 30_000 };

/**
 * A final refusal of the socket this soon after the one that made the session be asked again (the
 * new token's first handshakes) means the gateway refuses what REST accepts. One much later, after
 * the socket could not even reach the gateway meanwhile, is judged afresh.
 */
export const REFUSED_AGAIN_WITHIN_MS = 60_000;

/**
 * The longest wait between polls that keep getting answers the SDK cannot read (not the
 * service's): they are not fatal (the widget must outlive a firewall's or a proxy's hiccup), but
 * one that persists (a wrong apiBaseUrl) is not hammered at poll_ms either.
 */
export const UNREADABLE_POLL_MAX_MS = 60_000;

/**
 * While the socket carries the state, the state is still read over REST about this often (60 to
 * 90 s, spread so that widgets reconnected together do not read together), conditionally: a 304
 * when nothing moved. A push is best-effort: one lost without anyone noticing (its node killed
 * while cut off from Redis, a change whose commit's answer never came) would otherwise leave the
 * widget showing an old state, a hung-up call as connected, until the agent's next change. The
 * service's caches use nothing older than a minute (BUS_CACHE_MAX_AGE_MS in api/domain/bus-cache.ts,
 * which bounds how stale a check's answer can be), so such a check sees the store's state. At
 * 10,000 widgets, about 130 requests a second (docs/sdk.md, "Live check", says what each costs).
 */
export const LIVE_CHECK_MS = 60_000;

export interface TransportDeps {
  clock: Clock;
  io: SocketFactory;
  session: SessionKeeper;
  getState: (etag: string | null) => Promise<HttpAnswer<WidgetState>>;
  /** `polled`: answered in full to a conditional poll, so its tag moved (snapshots.ts) */
  onSnapshot: (state: WidgetState, polled?: boolean) => void;
  onStatus: (status: TransportStatus) => void;
  /** poll_ms of the last snapshot */
  pollMs: () => number;
}

export class Transport {
  status: TransportStatus = 'poll';
  private socket: MiniSocket | null = null;
  private realtime: Realtime | null = null;
  private socketUp = false;
  private pollOk: boolean | null = null;
  /** how many polls in a row got an answer the SDK cannot read (see UNREADABLE_POLL_MAX_MS) */
  private unreadable = 0;
  private etag: string | null = null;
  private pollTimer: TimerHandle | undefined;
  /** the next read of the state while the socket is up (LIVE_CHECK_MS) */
  private liveCheckTimer: TimerHandle | undefined;
  /** a read of the state (a poll or a live check) is in flight */
  private polling = false;
  private reconnectTimer: TimerHandle | undefined;
  private attempts = 0;
  /** when the socket last connected (clock ms), and whether its state came since */
  private upSince = 0;
  private stateSinceUp = false;
  /** when the last read (a poll or a live check) was sent (clock ms) */
  private lastPollAt = -Infinity;
  /**
   * A final refusal of the socket made the session be asked again, and the socket has not been
   * accepted since: a second one means the gateway refuses what REST accepts (the session budget,
   * reset by every poll that works, would otherwise re-ask forever).
   */
  private socketReasked = false;
  /** when (clock ms): a refusal long after, with the socket never up between, is a new one */
  private reaskedAt = 0;
  /** the token the gateway refused a second time: the socket stays closed until another token */
  private refusedToken: string | null = null;
  private planned = false;
  /** a rate-limited handshake's retry_after: no handshake before this (clock ms) */
  private notBefore = 0;
  private endHandled = false;
  /** a retry ending's retry_after (ms): the reconnect after its disconnect waits that long */
  private endWaitMs = 0;
  private socketToken: string | null = null;
  private stopped = false;
  /** a window message arrived while a poll was in flight (which may have read the old state) */
  private pollAgain = false;
  /** no poll before this (ms): the server's Retry-After, which nothing that asks for a poll cuts short */
  private pollNotBefore = 0;
  /** whether the socket, connected, still carries what it should (shared/socket-doubt.ts) */
  private readonly doubt: SocketDoubt<TimerHandle>;
  /** the polls window messages ask for (pollNow) */
  private readonly nudgedPoll: { call(): void; cancel(): void };

  constructor(private readonly d: TransportDeps) {
    this.doubt = new SocketDoubt(d.clock, {
      // in doubt, the widget polls and its commands go over REST
      doubted: () => {
        this.setStatus();
        this.pollSoon(0);
      },
      trusted: () => this.setStatus(),
      dead: () => this.socket?.disconnect(),
    });
    this.nudgedPoll = spaced(d.clock, NUDGE_MIN_MS, () => {
      if (this.stopped || this.live) return;
      if (this.polling) this.pollAgain = true;
      else this.pollSoon(0);
    });
  }

  start(realtime: Realtime | null): void {
    this.realtime = realtime;
    this.openSocket();
    this.pollSoon(0);
  }

  /** The token changed: reconnect the socket with it (the old token lingers 30 s server-side). */
  reconnect(): void {
    if (this.stopped) return;
    if (!this.socket) return this.openSocket();
    this.d.clock.cancel(this.reconnectTimer);
    this.reconnectTimer = undefined;
    this.planned = true;
    this.socket.disconnect();
    // Polled until the new handshake is accepted (connect stops it): a slow or stalled handshake
    // (socket.io-client has no limit of its own on it) must not leave the widget with neither.
    this.pollAfterDrop();
    const wait = this.notBefore - this.d.clock.now();
    if (wait <= 0) return this.connectSocket();
    this.planned = false;
    this.scheduleReconnect(wait);
  }

  /**
   * A command over the socket, answered like POST /widget/commands; null when not connected. When
   * no answer comes in time, the command's retry goes over REST (commands.ts), and the socket is
   * closed if nothing at all, not even a ping, came on it for SOCKET_SILENT_MS: a connection that
   * died without a word looks connected until its ping timeout, and meanwhile the state would not
   * move. Until then it is in doubt: commands go over REST and the widget polls, until anything
   * arrives on it again (a slow server still pings). Closed, a new socket opens after the backoff.
   */
  emitCommand(command: Command, timeoutMs: number): Promise<CommandResult | ErrorEnvelope> | null {
    const socket = this.socket;
    if (!socket || !this.live) return null;
    return new Promise((resolve, reject) =>
      socket.timeout(timeoutMs).emit('command', command, (err, reply) => {
        if (!err) return resolve(reply as CommandResult | ErrorEnvelope);
        if (this.socket === socket && this.socketUp) this.doubt.unanswered();
        reject(new SdkError('unreachable', 'The command was not acknowledged in time.'));
      }),
    );
  }

  /** Changes reach this widget by push: the socket is up and not in doubt. */
  private get live(): boolean {
    return this.socketUp && !this.doubt.doubted;
  }

  /**
   * The call window says the agent's state moved (a window message): poll now rather than at the
   * next poll_ms, while polling (the socket pushes the change otherwise), and at most once every
   * NUDGE_MIN_MS, so that messages cannot make the widget spend its rate limit.
   */
  pollNow(): void {
    if (!this.stopped && !this.live) this.nudgedPoll.call();
  }

  /** Whether changes reach this widget by push (else it polls). */
  get pushing(): boolean {
    return this.live;
  }

  /** A new session: the next poll asks for the whole state (the ETag was the old session's). */
  forgetEtag(): void {
    this.etag = null;
  }

  stop(): void {
    this.stopped = true;
    this.doubt.reset();
    this.nudgedPoll.cancel();
    this.d.clock.cancel(this.pollTimer);
    this.d.clock.cancel(this.liveCheckTimer);
    this.d.clock.cancel(this.reconnectTimer);
    this.socket?.disconnect();
    this.socket = null;
  }

  private openSocket(): void {
    const rt = this.realtime;
    if (this.socket || !rt || !rt.available || this.stopped) return;
    if (this.refusedToken !== null && this.refusedToken === this.d.session.token) return;
    const socket = this.d.io(rt.url, {
      path: rt.path,
      // A callback, so every (re)connect presents the current token.
      auth: (cb: (auth: { token: string | null }) => void) => {
        this.socketToken = this.d.session.token;
        cb({ token: this.socketToken });
      },
      transports: ['websocket', 'polling'],
      tryAllTransports: true,
      reconnection: false,
      autoConnect: false,
      forceNew: true,
    });
    this.socket = socket;
    const heard = () => this.doubt.heard();
    socket.io?.on('ping', heard);
    socket.io?.on('packet', heard);
    socket.on('connect', () => {
      heard();
      this.socketUp = true;
      // What the polls said before is stale: when this socket drops, nothing says the service is down.
      this.pollOk = null;
      // The backoff is not reset here: see SOCKET_HEALTHY_MS.
      this.upSince = this.d.clock.now();
      this.stateSinceUp = false;
      this.notBefore = 0;
      this.socketReasked = false;
      this.refusedToken = null;
      this.d.session.confirm();
      this.d.clock.cancel(this.pollTimer);
      this.pollTimer = undefined;
      this.scheduleLiveCheck();
      this.setStatus();
    });
    socket.on('state', (state: WidgetState) => {
      if (this.socketUp) this.stateSinceUp = true;
      this.d.onSnapshot(state);
    });
    socket.on('ended', (end: SocketEnd) => {
      this.endHandled = this.onEnd(end);
      // A retry ending may say how long to wait (a node whose store is struggling): every widget
      // it ended then comes back spread over that wait, not within the first backoff.
      if (!this.endHandled) this.endWaitMs = retryAfterMs(end.retry_after);
    });
    socket.on('disconnect', () => {
      const healthy = this.socketUp && this.stateSinceUp && this.d.clock.now() - this.upSince >= SOCKET_HEALTHY_MS;
      if (healthy) this.attempts = 0;
      this.socketUp = false;
      this.doubt.reset();
      this.d.clock.cancel(this.liveCheckTimer);
      this.liveCheckTimer = undefined;
      this.setStatus();
      if (this.planned || this.stopped) return;
      this.pollAfterDrop();
      if (!this.endHandled) this.scheduleReconnect(this.endWaitMs);
    });
    socket.on('connect_error', (err: Error & { data?: SocketEnd }) => {
      this.socketUp = false;
      this.planned = false;
      if (this.stopped) return;
      const data = err?.data;
      const wait = retryAfterMs(data?.retry_after);
      if (wait > 0) this.notBefore = this.d.clock.now() + wait;
      if (!(data && typeof data.code === 'string' && this.onEnd(data))) this.scheduleReconnect(wait);
      // Poll unless polling is already under way (failed reconnects must not poll faster than poll_ms).
      if (this.pollTimer === undefined) this.pollAfterDrop();
    });
    this.connectSocket();
  }

  private connectSocket(): void {
    this.endHandled = false;
    this.endWaitMs = 0;
    this.socket?.connect();
    this.planned = false;
  }

  /** Acts on an ending; returns true when it took charge of what happens next (else: reconnect with backoff). */
  private onEnd(end: SocketEnd): boolean {
    if (!end.final) {
      if (end.code !== 'token_expired' || this.socketToken !== this.d.session.token) return false;
      // The refresh reconnects with the new token; if it fails, the session asks again or ends.
      void this.d.session.refresh();
      return true;
    }
    const error = new SdkError(end.code, end.message, end.code === 'unauthorized' ? 401 : 403);
    this.closeSocket();
    // platform_disabled ends the session (error); any other final ending is about this
    // credential: the session endpoint is asked once more, and its new token reopens the socket.
    // Refused again before it was ever accepted, the socket stays closed until the next token (the
    // refresh) while the widget polls: REST, if it refuses the token too, asks the session itself.
    if (!isFatal(error) && this.socketReasked && this.d.clock.now() - this.reaskedAt < REFUSED_AGAIN_WITHIN_MS) {
      this.refusedToken = this.d.session.token;
      return true;
    }
    this.socketReasked = !isFatal(error);
    this.reaskedAt = this.d.clock.now();
    void this.d.session.rejected(error);
    return true;
  }

  private closeSocket(): void {
    this.d.clock.cancel(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const socket = this.socket;
    this.socket = null;
    this.socketUp = false;
    socket?.disconnect();
  }

  /** Reconnects after a full-jitter backoff, or after `waitMs` (a refusal's or an ending's retry_after) spread out, whichever is longer. */
  private scheduleReconnect(waitMs = 0): void {
    if (this.stopped || !this.socket || this.reconnectTimer !== undefined) return;
    this.reconnectTimer = this.d.clock.after(reconnectWait(waitMs, this.attempts++, SOCKET_BACKOFF), () => {
      this.reconnectTimer = undefined;
      if (this.socket && !this.socketUp && !this.stopped) this.connectSocket();
    });
  }

  /**
   * The socket dropped (or failed to connect): poll, at once unless the last poll was sent less
   * than poll_ms ago. A socket that keeps dropping right after connecting does not make the widget
   * poll faster than when it has no socket at all.
   */
  private pollAfterDrop(): void {
    this.pollSoon(this.untilPollDue());
  }

  /** How long until a poll is due: poll_ms after the last read was sent, or now. */
  private untilPollDue(): number {
    return Math.max(0, this.lastPollAt + this.d.pollMs() - this.d.clock.now());
  }

  private pollSoon(ms: number): void {
    if (this.stopped || this.live || this.polling) return;
    this.d.clock.cancel(this.pollTimer);
    this.pollTimer = this.d.clock.after(Math.max(ms, this.pollNotBefore - this.d.clock.now()), () => {
      this.pollTimer = undefined;
      void this.poll();
    });
  }

  /**
   * The live checks of a socket: one LIVE_CHECK_MS (spread) from now, and from each the next, for
   * as long as the socket is up, whatever each one does (a check in flight as the socket falls in
   * doubt and is trusted again must not end them). The socket's next connect starts them again.
   */
  private scheduleLiveCheck(): void {
    this.d.clock.cancel(this.liveCheckTimer);
    this.liveCheckTimer = undefined;
    if (this.stopped) return;
    this.liveCheckTimer = this.d.clock.after(spreadWait(LIVE_CHECK_MS), () => {
      this.liveCheckTimer = undefined;
      if (this.stopped || !this.socketUp) return;
      this.scheduleLiveCheck();
      // In doubt, or a read under way: the widget is polling anyway.
      if (this.live && !this.polling) void this.poll('check');
    });
  }

  /**
   * Reads the state: a `poll` while the socket is down or in doubt, a `check` while it is up
   * (LIVE_CHECK_MS). A check that gets no answer says nothing about the service (the socket does).
   * If the socket dropped (or fell in doubt) during a check, the polls that follow it are timed
   * from the check, as after any read: a check held unanswered holds the first poll until it gives
   * up (REQUEST_TIMEOUT_MS), when that poll goes at once.
   */
  private async poll(kind: 'poll' | 'check' = 'poll'): Promise<void> {
    if (this.stopped || this.polling || this.live !== (kind === 'check')) return;
    this.polling = true;
    const sentAt = (this.lastPollAt = this.d.clock.now());
    let next = this.d.pollMs();
    // An answer that comes after a logout, or after a new session (perhaps for another agent), is
    // dropped, success or refusal: another agent's call is not this session's to show. A refresh
    // is the same session (and its answer is what sets the server clock the refresh is timed by).
    const sentFor = this.d.session.session;
    const stale = () => this.stopped || sentFor !== this.d.session.session;
    try {
      const answer = await this.d.getState(this.etag);
      if (stale()) next = 0;
      else {
        if (answer.etag) this.etag = answer.etag;
        this.d.session.confirm();
        this.pollOk = true;
        this.unreadable = 0;
        this.pollNotBefore = 0;
        if (answer.status === 200 && answer.body) {
          this.d.onSnapshot(answer.body, true);
          if (answer.body.realtime?.available && !this.socket) {
            this.realtime = answer.body.realtime;
            this.openSocket();
          }
        }
      }
    } catch (error) {
      if (stale()) next = 0;
      // Anything else thrown (a defect applying the snapshot) ends the session as an error: taken
      // for no answer, it would say reconnecting, and the next poll's 304 would hide it.
      else if (!(error instanceof SdkError)) {
        this.d.session.abort(new SdkError('internal_error', (error as Error)?.message ?? String(error)));
        return;
      } else if (isRejection(error) || isFatal(error)) {
        // Still polling while the session endpoint is asked again: a read sent meanwhile would
        // carry the refused token. The new token's read goes as soon as it is in use.
        if (await this.d.session.rejected(error)) next = 0;
        else return;
      } else if (!isTransient(error) && !error.code.startsWith('http_')) {
        // The service itself refused the poll with a code the SDK cannot act on (a not_found: the
        // apiBaseUrl is wrong): the integration is misconfigured, and no retry will mend it.
        this.d.session.abort(error);
        return;
      } else {
        // Down is when the service does not answer; a 429 is the service answering (slow down).
        // Not a poll sent before the socket came up: the socket has said how the service is since.
        if (kind === 'poll' && !(this.socketUp && this.upSince >= sentAt)) this.pollOk = error.status === 429;
        if (error.retryAfter) {
          next = error.retryAfter * 1000;
          this.pollNotBefore = this.d.clock.now() + next;
        } else if (!isTransient(error) && kind === 'poll') {
          // An answer that is not the service's (no envelope: a firewall's challenge page, a
          // proxy's 404 while a deploy swaps nodes): nothing to act on, and no reason to end the
          // session, in the middle of a call least of all. Polled again, further apart each time.
          next = Math.min(UNREADABLE_POLL_MAX_MS, next * 2 ** Math.min(this.unreadable++, 8));
        }
      }
    } finally {
      this.polling = false;
      this.setStatus();
    }
    // A check's answer sets nothing for the polls (a Retry-After does, through pollNotBefore): they are due poll_ms after it was sent.
    if (kind === 'check' && next > 0) next = this.untilPollDue();
    if (this.pollAgain) {
      this.pollAgain = false;
      next = 0;
    }
    this.pollSoon(next);
  }

  private setStatus(): void {
    const status: TransportStatus = this.live ? 'push' : this.pollOk === false ? 'down' : 'poll';
    if (status === this.status) return;
    this.status = status;
    this.d.onStatus(status);
  }
}
