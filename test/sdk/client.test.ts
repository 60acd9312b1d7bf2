// @vitest-environment happy-dom
/**
 * The whole SDK in a DOM against a scripted service (fetch) and a fake Socket.IO socket: session,
 * push and polling, endings, commands and their effects, enableCalls, requestCall's 30 s rule,
 * the server-duration timer, and the widget's Shadow DOM.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Call, Engine, FailedCommand, Policy, WidgetState } from '../../sdk/src/contract.js';
import { Click2CallWidget, type ClientDeps } from '../../sdk/src/client.js';
import * as SDK from '../../sdk/src/index.js';
import { systemClock } from '../../sdk/src/timing.js';
import { ACK_TIMEOUT_MS, COMMAND_ATTEMPTS, ORDERED_WAIT_MS, SESSION_WAIT_MS } from '../../sdk/src/commands.js';
import { REQUEST_TIMEOUT_MS } from '../../sdk/src/http.js';
import { LIVE_CHECK_MS, SOCKET_HEALTHY_MS } from '../../sdk/src/transport.js';
import { PAIRED_WAIT_MS } from '../../sdk/src/launcher.js';
import { Snapshots } from '../../sdk/src/snapshots.js';
import { SOCKET_SILENT_MS } from '../../shared/events.js';
import { T0, call, engine } from './fixtures.js';
import { CommandResult, LaunchTicket, WidgetRefresh, WidgetState as WidgetStateSchema } from '../../shared/schemas/widget-api.js';
import { Session as SessionSchema } from '../../shared/schemas/server-api.js';

const API = 'https://c2c.example/api/v1/click2call';
const ORIGIN = 'https://crm.example.com';

// ——— a scripted service ———

class FakeSocket {
  connected = false;
  connects = 0;
  tokens: Array<string | null> = [];
  sent: Array<{ event: string; payload: any; ack: (err: Error | null, reply: unknown) => void }> = [];
  private handlers = new Map<string, Array<(...args: any[]) => void>>();
  private managerHandlers = new Map<string, Array<() => void>>();
  /** socket.io-client's Manager, as far as the SDK listens to it */
  readonly io = {
    on: (event: string, fn: () => void) => {
      this.managerHandlers.set(event, [...(this.managerHandlers.get(event) ?? []), fn]);
      return this.io;
    },
  };
  /** a ping from the server arrives on the connection */
  ping() {
    for (const fn of this.managerHandlers.get('ping') ?? []) fn();
  }
  constructor(
    readonly url: string,
    readonly opts: Record<string, any>,
  ) {}
  on(event: string, fn: (...args: any[]) => void) {
    this.handlers.set(event, [...(this.handlers.get(event) ?? []), fn]);
    return this;
  }
  connect() {
    this.connects++;
    return this;
  }
  disconnect() {
    if (this.connected) {
      this.connected = false;
      this.fire('disconnect', 'io client disconnect');
    }
    return this;
  }
  /** as socket.io-client: the ack gets an error once `ms` pass without an answer */
  timeout(ms: number) {
    return {
      emit: (event: string, payload: unknown, ack: (err: Error | null, reply: unknown) => void) => {
        let answered = false;
        const timer = setTimeout(() => answer(new Error('operation has timed out'), undefined), ms);
        const answer = (err: Error | null, reply: unknown) => {
          if (answered) return;
          answered = true;
          clearTimeout(timer);
          ack(err, reply);
        };
        this.sent.push({ event, payload, ack: answer });
      },
    };
  }
  fire(event: string, ...args: unknown[]) {
    for (const fn of this.handlers.get(event) ?? []) fn(...args);
  }
  /** the server accepts the handshake: reads the auth callback like socket.io-client does */
  accept(state?: WidgetState) {
    this.opts.auth((a: { token: string }) => this.tokens.push(a.token));
    this.connected = true;
    this.fire('connect');
    if (state) this.fire('state', state);
  }
  drop(reason = 'transport close') {
    this.connected = false;
    this.fire('disconnect', reason);
  }
}

const policy = (controls: Policy['controls'] = ['mute', 'dtmf'], over: Partial<Policy> = {}): Policy => ({
  outbound: true,
  inbound: true,
  number_visibility: 'masked',
  controls,
  widget: { position: 'bottom-right', language: 'en', window_mode: 'popup' },
  max_call_seconds: 3600,
  ...over,
});



interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

class Service {
  version = 1;
  serverTime = T0;
  engine: Engine | null = engine();
  call: Call | null = null;
  policy = policy();
  realtimeAvailable = true;
  pollMs = 3000;
  failedCommand: FailedCommand | null = null;
  tokenSeq = 0;
  /** states outside the service's schema are answered (an older release's, a hostile proxy's), for the tests of the SDK's defences */
  offContract = false;
  requests: Array<{ method: string; path: string; headers: Record<string, string>; body: any; signal?: AbortSignal | null }> = [];
  sockets: FakeSocket[] = [];
  /** per path: replies to use before the default behaviour */
  /** 'hang': the request is never answered, its abort ignored (a proxy that holds the connection) */
  script = new Map<string, Array<Reply | 'network' | 'hang'>>();
  /** per path: a request waits for this before it is answered (a slow answer the test lets go) */
  held = new Map<string, Promise<void>>();

  state(over: Partial<WidgetState> = {}): WidgetState {
    return {
      ok: true,
      engine: this.engine,
      call: this.call,
      policy: this.policy,
      agent: { name: 'Ana', identifier: 'ana@acme.example', type: 'email', department: 'Sales' },
      version: this.version,
      server_time: this.serverTime,
      poll_ms: this.pollMs,
      session_expires_at: T0 + 1800,
      realtime: { url: 'https://gw.example', path: '/socket.io', available: this.realtimeAvailable },
      failed_command: this.failedCommand,
      ...over,
    };
  }

  /** The body as the service's schema has it (unless the test plays something else: offContract). */
  checked<T>(schema: { parse(value: unknown): T }, body: T): T {
    return this.offContract ? body : schema.parse(body);
  }

  /** changes the state (a new version) */
  set(change: Partial<Pick<Service, 'engine' | 'call' | 'policy' | 'failedCommand'>>) {
    Object.assign(this, change);
    this.version++;
  }

  push(socket = this.sockets.at(-1)!) {
    const { session_expires_at: _, ...pushed } = this.state();
    socket.fire('state', pushed);
  }

  count(path: string, method?: string) {
    return this.requests.filter((r) => r.path === path && (!method || r.method === method)).length;
  }

  readonly fetch = async (input: string, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(input, ORIGIN);
    const path = url.origin === ORIGIN ? url.pathname : url.pathname.replace('/api/v1/click2call', '');
    const headers = Object.fromEntries(Object.entries((init.headers ?? {}) as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]));
    const body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined;
    this.requests.push({ method: init.method ?? 'GET', path, headers, body, signal: init.signal });
    const scripted = this.script.get(path)?.shift();
    if (scripted === 'network') throw new TypeError('Failed to fetch');
    if (scripted === 'hang') return new Promise<Response>(() => {});
    await this.held.get(path);
    const reply = scripted ?? this.answer(path, headers, body);
    return new Response(reply.status === 304 || reply.body === undefined ? null : JSON.stringify(reply.body), {
      status: reply.status,
      headers: { 'content-type': 'application/json', ...reply.headers },
    });
  };

  private answer(path: string, headers: Record<string, string>, body: any): Reply {
    switch (path) {
      case '/crm/session':
        // the integrator's backend forwards the service's Session
        return { status: 201, body: this.checked(SessionSchema, { ...this.state(), ok: true, widget_token: `c2cw_${++this.tokenSeq}`, expires_at: T0 + 1800 }) };
      case '/widget/state': {
        const etag = `"${this.version}"`;
        if (headers['if-none-match'] === etag) return { status: 304, headers: { etag } };
        // the stand-in answers only what the service could (checked against its own schema), but where a test says it plays something else
        return { status: 200, body: this.checked(WidgetStateSchema, this.state()), headers: { etag } };
      }
      case '/widget/refresh':
        return { status: 200, body: this.checked(WidgetRefresh, { ok: true, widget_token: `c2cw_${++this.tokenSeq}`, expires_at: this.serverTime + 1800 }) };
      case '/widget/launch-ticket':
        return { status: 200, body: this.checked(LaunchTicket, { ok: true, ticket: 'c2cl_t', window_url: 'https://c2c.example/click2call/window#ticket=c2cl_t', expires_in: 600, window_name: 'c2c_abcdef' }) };
      case '/widget/commands':
        return { status: 200, body: this.checked(CommandResult, { ok: true, status: 'queued', command_id: 1 }) };
      case '/widget/revoke':
        return { status: 200, body: { ok: true, revoked: true } };
      case '/crm/call':
        return { status: 202, body: { ...call('queued', { request_id: 'ci_new', call_id: 'ci_new' }), ok: true, contact_reference: body?.contact_reference } };
      default:
        return { status: 404, body: { ok: false, error: 'not_found', message: 'Not found.' } };
    }
  }
}

// ——— the page ———

let service: Service;
let widget: Click2CallWidget;
let opened: Array<{ url: string; target: string; features?: string; win: any }>;
let openResult: (target: string) => any;
let store: Map<string, string>;

function start(options: Partial<Parameters<typeof SDK.init>[0]> = {}, deps: Partial<ClientDeps> = {}) {
  widget = new Click2CallWidget(
    { integrationId: 'c2c_demo', sessionEndpoint: '/crm/session', requestCallEndpoint: '/crm/call', apiBaseUrl: API, headers: { 'X-CSRF-Token': 'csrf-1' }, ...options },
    {
      fetch: service.fetch,
      io: (url, opts) => {
        const s = new FakeSocket(url, opts);
        service.sockets.push(s);
        return s;
      },
      clock: systemClock,
      open: (url, target, features) => {
        const win = openResult(target);
        opened.push({ url, target, features, win });
        return win;
      },
      storage: { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => void store.set(k, v) },
      origin: ORIGIN,
      scriptOrigin: null,
      ...deps,
    },
  ).start();
  return widget;
}

/** start(), with the requests to one path (its end) held until the returned function lets them go. */
function startHolding(pathEnd: string): () => void {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  start({}, {
    fetch: async (input, init) => {
      if (String(input).endsWith(pathEnd)) await held;
      return service.fetch(String(input), init);
    },
  });
  return release;
}

/** A started widget whose socket the service accepted with `state`. */
async function ready(state = service.state()) {
  start();
  await flush();
  const socket = service.sockets[0]!;
  socket.accept(state);
  return socket;
}

const root = () => document.querySelector('[data-testid="c2c-host"]')!.shadowRoot!;
const q = (id: string) => root().querySelector(`[data-testid="${id}"]`) as HTMLElement;
const visible = (id: string) => !!q(id) && !q(id).hidden;
const flush = () => vi.advanceTimersByTimeAsync(0);
/** What became of a promise so far, read without waiting for it. */
function outcome(promise: Promise<unknown>) {
  const seen: { settled: boolean; value?: unknown; error?: any } = { settled: false };
  promise.then(
    (value) => Object.assign(seen, { settled: true, value }),
    (error) => Object.assign(seen, { settled: true, error }),
  );
  return seen;
}
const blankWindow = () => ({ closed: false, name: '', location: { href: 'about:blank', replace: vi.fn() }, document: { title: '', body: { textContent: '' } }, focus: vi.fn(), close: vi.fn(), postMessage: vi.fn() });

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date('2020-01-01T00:00:00Z'));
  service = new Service();
  opened = [];
  store = new Map();
  openResult = () => blankWindow();
  document.body.innerHTML = '';
});
afterEach(() => {
  widget?.detach();
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('session and first state', () => {
  it('asks the session endpoint, polls once, connects the socket, and shows ready', async () => {
    const changes: string[] = [];
    start().on('statechange', (e) => changes.push(e.state));
    expect(q('c2c-state').dataset.state).toBe('connecting');
    await flush();
    const sessionRequest = service.requests[0]!;
    expect(sessionRequest).toMatchObject({ method: 'POST', path: '/crm/session', body: { integration_id: 'c2c_demo', origin: ORIGIN } });
    expect(sessionRequest.headers['x-csrf-token']).toBe('csrf-1');
    const poll = service.requests.find((r) => r.path === '/widget/state')!;
    expect(poll.headers.authorization).toBe('Bearer c2cw_1');
    expect(poll.headers['x-csrf-token']).toBeUndefined(); // the headers option is for the integrator's endpoints only
    expect(q('c2c-state').dataset.state).toBe('ready');
    expect(changes).toEqual(['ready']); // 'connecting' was emitted inside start(), before on()
    const socket = service.sockets[0]!;
    expect(socket.url).toBe('https://gw.example');
    expect(socket.opts).toMatchObject({ path: '/socket.io', transports: ['websocket', 'polling'], reconnection: false });
    socket.accept(service.state());
    expect(socket.tokens).toEqual(['c2cw_1']);
    expect(widget.getState()).toMatchObject({ state: 'ready', engine: { id: 'eng_1' }, call: null, policy: { controls: ['mute', 'dtmf'] }, agent: { name: 'Ana' }, session: { expires_at: T0 + 1800 } });
  });

  it('says unauthorized when the session endpoint refuses the user', async () => {
    service.script.set('/crm/session', [{ status: 403, body: { ok: false, error: 'agent_not_assigned', message: 'The member is not covered by the integration.' } }]);
    start();
    await flush();
    expect(q('c2c-state').dataset.state).toBe('unauthorized');
    expect(q('c2c-message').textContent).toBe('Calls are not enabled for you in this application.');
  });

  it('says error without apiBaseUrl when not loaded from a script tag', async () => {
    start({ apiBaseUrl: undefined });
    await flush();
    expect(widget.getState().state).toBe('error');
    expect(service.requests).toEqual([]);
  });

  it('defaults apiBaseUrl to the SDK script origin', async () => {
    start({ apiBaseUrl: undefined }, { scriptOrigin: 'https://c2c.example' });
    await flush();
    expect(widget.getState().state).toBe('ready');
  });
});

describe('push and polling', () => {
  it('applies only newer versions, from pushes and polls alike', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    service.set({ engine: engine({ available: false }) });
    service.push();
    expect(q('c2c-state').dataset.state).toBe('unavailable');
    const stale = { ...service.state({ version: 1 }), engine: engine() };
    socket.fire('state', stale);
    expect(q('c2c-state').dataset.state).toBe('unavailable');
  });

  it('polls every poll_ms with If-None-Match while the socket is down, and stops once it is back', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    const before = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(service.count('/widget/state')).toBe(before); // push: no polling
    socket.drop();
    await flush();
    expect(service.count('/widget/state')).toBe(before + 1);
    const conditional = service.requests.filter((r) => r.path === '/widget/state').at(-1)!;
    expect(conditional.headers['if-none-match']).toBe('"1"');
    await vi.advanceTimersByTimeAsync(3000);
    expect(service.count('/widget/state')).toBe(before + 2); // 304: unchanged
    service.set({ call: call('incoming', { direction: 'inbound' }) });
    await vi.advanceTimersByTimeAsync(3000);
    expect(q('c2c-state').dataset.state).toBe('call');
    expect(socket.connects).toBeGreaterThan(1); // reconnect attempts with backoff
    socket.accept(service.state());
    const polls = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(9000);
    expect(service.count('/widget/state')).toBe(polls);
  });

  it("shows a correction a poll answers in full at the version it holds (pushed from a node that built it with a policy cached before the operator's change)", async () => {
    service.set({ policy: policy(['mute', 'dtmf']) });
    await ready();
    expect(widget.getState().policy?.controls).toEqual(['mute', 'dtmf']);
    // the operator had turned the keypad off at this very version; the node that pushed it had not heard yet
    const version = service.version;
    service.script.set('/widget/state', [{ status: 200, body: { ...service.state(), version, policy: policy(['mute']) }, headers: { etag: `"${version}.corrected"` } }]);
    await vi.advanceTimersByTimeAsync(LIVE_CHECK_MS * 1.5 + 1);
    expect(service.requests.filter((r) => r.path === '/widget/state').at(-1)!.headers['if-none-match']).toBe(`"${version}"`);
    expect(widget.getState().policy?.controls).toEqual(['mute']);
  });

  it('reads the state over REST every minute or so while pushed, conditionally, so a push lost without a drop is healed', async () => {
    service.set({ call: call('connected') });
    const socket = await ready();
    expect(q('c2c-state').dataset.state).toBe('call');
    const before = service.count('/widget/state');
    service.set({ call: null }); // hung up, and its push lost (a node killed before it left)
    await vi.advanceTimersByTimeAsync(LIVE_CHECK_MS - 1);
    expect(service.count('/widget/state')).toBe(before);
    expect(q('c2c-state').dataset.state).toBe('call');
    await vi.advanceTimersByTimeAsync(LIVE_CHECK_MS / 2 + 1); // spread over half as long again
    expect(service.count('/widget/state')).toBe(before + 1);
    expect(q('c2c-state').dataset.state).toBe('ready');
    expect(socket.connected).toBe(true);
    await vi.advanceTimersByTimeAsync(LIVE_CHECK_MS * 1.5);
    expect(service.count('/widget/state')).toBe(before + 2);
    const conditional = service.requests.filter((r) => r.path === '/widget/state').at(-1)!;
    expect(conditional.headers['if-none-match']).toBe(`"${service.version}"`); // answered 304
    socket.drop();
    await flush();
    await vi.advanceTimersByTimeAsync(LIVE_CHECK_MS * 1.5);
    expect(service.count('/widget/state')).toBeGreaterThan(before + 2 + 20); // down: polled every poll_ms
  });

  it('takes a live check nothing answered for nothing said of the service (the socket is), and polls on if the socket drops during one', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0); // each check comes LIVE_CHECK_MS after the connect
    const socket = await ready();
    service.script.set('/widget/state', ['network']);
    await vi.advanceTimersByTimeAsync(LIVE_CHECK_MS);
    expect(service.script.get('/widget/state')).toEqual([]); // the check was made, and failed
    socket.drop(); // what the failed check said is not taken for the service being down
    expect(q('c2c-state').dataset.state).toBe('ready');
    await flush();
    socket.accept(service.state());
    service.script.set('/widget/state', ['hang']);
    const before = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(LIVE_CHECK_MS);
    expect(service.count('/widget/state')).toBe(before + 1); // the check, held unanswered
    socket.drop();
    await vi.advanceTimersByTimeAsync(REQUEST_TIMEOUT_MS - 1);
    expect(q('c2c-state').dataset.state).toBe('ready');
    expect(service.count('/widget/state')).toBe(before + 1);
    service.set({ call: call('connected') });
    await vi.advanceTimersByTimeAsync(10); // the check gave up: the first poll goes at once
    expect(service.count('/widget/state')).toBe(before + 2);
    expect(q('c2c-state').dataset.state).toBe('call');
    await vi.advanceTimersByTimeAsync(service.pollMs);
    expect(service.count('/widget/state')).toBe(before + 3); // and polls carry on
  });

  it('goes on checking after a check that gave up while the socket was in doubt, once the socket is trusted again', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0); // each check comes LIVE_CHECK_MS after the one before
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    /** the server's pings, every 10 s */
    const alive = async (ms: number) => {
      for (let passed = 0; passed < ms; passed += 10_000) {
        await vi.advanceTimersByTimeAsync(10_000);
        socket.ping();
      }
    };
    service.script.set('/widget/state', ['hang']);
    await alive(LIVE_CHECK_MS); // the check is sent, and held unanswered
    const hangup = widget.hangup(); // unanswered on the socket (ACK_TIMEOUT_MS): in doubt
    await alive(REQUEST_TIMEOUT_MS); // the check gives up in doubt, then a ping: trusted again
    expect(await hangup).toMatchObject({ ok: true }); // sent again over REST
    const after = service.count('/widget/state');
    await alive(LIVE_CHECK_MS * 2);
    expect(socket.connected).toBe(true);
    expect(service.count('/widget/state')).toBeGreaterThanOrEqual(after + 1);
  });

  it('only polls when the service has no gateway', async () => {
    service.realtimeAvailable = false;
    start();
    await flush();
    await vi.advanceTimersByTimeAsync(6000);
    expect(service.sockets).toHaveLength(0);
    expect(service.count('/widget/state')).toBe(3);
  });

  it('polls no faster than once a second whatever poll_ms a state gives', async () => {
    service.realtimeAvailable = false;
    service.pollMs = 0; // no service sends it: the SDK's own floor is what is tested
    service.offContract = true;
    start();
    await flush();
    await vi.advanceTimersByTimeAsync(5000);
    // at 0 s (its next poll set before the first state came: the default poll_ms), 3, 4 and 5 s
    expect(service.count('/widget/state')).toBe(4);
  });

  /** Starts the client and has its first handshake refused rate_limited, asking it to wait retryAfter seconds (Math.random() is 0.5). */
  async function refusedRateLimited(retryAfter: number) {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    start();
    await flush();
    const socket = service.sockets[0]!;
    const connects = socket.connects;
    socket.fire('connect_error', Object.assign(new Error('slow down'), { data: { code: 'rate_limited', final: false, message: 'Too many requests.', retry_after: retryAfter } }));
    return { socket, connects };
  }

  it('after a rate-limited handshake, polls meanwhile and reconnects no sooner than its retry_after', async () => {
    const { socket, connects } = await refusedRateLimited(20);
    await flush();
    const polls = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(20_000);
    expect(socket.connects).toBe(connects);
    expect(service.count('/widget/state')).toBeGreaterThanOrEqual(polls + 6);
    // then a random share of the wait again (random() is 0.5 here: 10 s), so that the clients held back together spread out
    await vi.advanceTimersByTimeAsync(9_999);
    expect(socket.connects).toBe(connects);
    await vi.advanceTimersByTimeAsync(1);
    expect(socket.connects).toBe(connects + 1);
  });

  it("after a retry ending that says how long to wait, polls meanwhile and reconnects no sooner than its retry_after", async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    await vi.advanceTimersByTimeAsync(1000);
    const connects = socket.connects;
    socket.fire('ended', { code: 'service_unavailable', final: false, message: 'The state store is unavailable.', retry_after: 5 });
    socket.drop('io server disconnect');
    const polls = service.count('/widget/state');
    // the wait, then a random share of it again (random() is 0.5: 2.5 s)
    await vi.advanceTimersByTimeAsync(7499);
    expect(socket.connects).toBe(connects);
    expect(service.count('/widget/state')).toBeGreaterThan(polls);
    await vi.advanceTimersByTimeAsync(1);
    expect(socket.connects).toBe(connects + 1);
  });

  it("takes a retry_after as a floor that its own backoff outgrows when the server keeps asking for it", async () => {
    // a node cut off from its store refuses every handshake with a 5 s retry_after for as long as that lasts
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    start();
    await flush();
    const socket = service.sockets[0]!;
    const refuse = () =>
      socket.fire('connect_error', Object.assign(new Error('isolated'), { data: { code: 'service_unavailable', final: false, message: 'This node is cut off from the service.', retry_after: 5 } }));
    // random() is 0.5: the wait and half of it again, 7.5 s, while the backoff (250 ms doubling) is
    // shorter; from the sixth refusal in a row, half of the backoff's 16 s outgrows it
    for (const wait of [7500, 7500, 7500, 7500, 7500, 8000]) {
      const connects = socket.connects;
      refuse();
      await vi.advanceTimersByTimeAsync(wait - 1);
      expect(socket.connects).toBe(connects);
      await vi.advanceTimersByTimeAsync(1);
      expect(socket.connects).toBe(connects + 1);
    }
  });

  it('a new token does not reconnect before the retry_after of a rate-limited handshake either', async () => {
    const { socket, connects } = await refusedRateLimited(1800);
    service.serverTime = T0 + 1740;
    await vi.advanceTimersByTimeAsync(1740_000);
    expect(service.count('/widget/refresh')).toBe(1);
    expect(socket.connects).toBe(connects);
    // 60 s are left of the wait, then half of the 30 s that the share is capped at
    await vi.advanceTimersByTimeAsync(74_999);
    expect(socket.connects).toBe(connects);
    await vi.advanceTimersByTimeAsync(1);
    expect(socket.connects).toBe(connects + 1);
  });

  it('gives up a poll that is never answered after REQUEST_TIMEOUT_MS, aborting it, and polls on', async () => {
    service.realtimeAvailable = false;
    start();
    await flush();
    service.script.set('/widget/state', ['hang']);
    await vi.advanceTimersByTimeAsync(3000);
    const hung = service.requests.filter((r) => r.path === '/widget/state').at(-1)!;
    expect(service.count('/widget/state')).toBe(2);
    service.set({ call: call('incoming', { direction: 'inbound' }) });
    await vi.advanceTimersByTimeAsync(REQUEST_TIMEOUT_MS - 1);
    expect(hung.signal?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(hung.signal?.aborted).toBe(true);
    expect(q('c2c-state').dataset.state).toBe('reconnecting'); // counted as no answer
    await vi.advanceTimersByTimeAsync(3000);
    expect(service.count('/widget/state')).toBe(3);
    expect(q('c2c-state').dataset.state).toBe('call');
  });

  /** Drops the socket after it was up `upMs` (with its state or not); returns how long it took to reconnect. */
  async function reconnectDelay(socket: FakeSocket, upMs: number, withState = true) {
    const connects: number[] = [];
    const connect = socket.connect.bind(socket);
    socket.connect = () => {
      connects.push(Date.now());
      return connect();
    };
    socket.accept(withState ? service.state() : undefined);
    await vi.advanceTimersByTimeAsync(upMs);
    const droppedAt = Date.now();
    socket.fire('ended', { code: 'service_unavailable', final: false, message: 'The state store is unavailable.' });
    socket.drop('io server disconnect');
    await vi.advanceTimersByTimeAsync(30_000);
    socket.connect = connect;
    expect(connects).toHaveLength(1);
    return connects[0]! - droppedAt;
  }

  it('reconnects a socket dropped right after each handshake ever more slowly, and starts from the base again only once one carried its state and stayed up SOCKET_HEALTHY_MS', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.99);
    start();
    await flush();
    const socket = service.sockets[0]!;
    // full jitter at 0.99 of a cap that doubles from 0.5 s
    const delays = [];
    for (let i = 0; i < 4; i++) delays.push(await reconnectDelay(socket, 0));
    expect(delays).toEqual([495, 990, 1980, 3960]);
    // up long enough, but its state never came: not proved healthy
    expect(await reconnectDelay(socket, SOCKET_HEALTHY_MS, false)).toBe(7920);
    // its state, but not up long enough
    expect(await reconnectDelay(socket, SOCKET_HEALTHY_MS - 1)).toBe(15_840);
    // healthy: the next drop is a new outage
    expect(await reconnectDelay(socket, SOCKET_HEALTHY_MS)).toBe(495);
  });

  it('polls no sooner than poll_ms after the last poll when the socket keeps dropping', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    const polls = service.count('/widget/state');
    for (let i = 0; i < 10; i++) {
      socket.accept(service.state());
      socket.drop();
      await vi.advanceTimersByTimeAsync(600);
    }
    // 6 s after the first poll: the polls of 3 s and 6 s, not one per drop
    expect(service.count('/widget/state') - polls).toBe(2);
  });

  it('says reconnecting while nothing answers, and recovers', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    await vi.advanceTimersByTimeAsync(3000); // the first poll is poll_ms old: a drop polls at once
    service.script.set('/widget/state', ['network', 'network']);
    socket.drop();
    await flush();
    expect(q('c2c-state').dataset.state).toBe('reconnecting');
    await vi.advanceTimersByTimeAsync(6000);
    expect(q('c2c-state').dataset.state).toBe('ready');
  });
});

describe('answers that are not the service\'s', () => {
  /** A widget on a service without a gateway: every change comes by polling. */
  async function startPolling() {
    service.realtimeAvailable = false;
    start();
    await flush();
  }

  it('a firewall\'s page on a poll, mid-call, does not end the session: it polls on, further apart, and Hang up still works', async () => {
    service.realtimeAvailable = false;
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    start();
    await flush();
    expect(q('c2c-state').dataset.state).toBe('call');
    const challenge: Reply = { status: 403, body: undefined, headers: { 'content-type': 'text/html' } };
    service.script.set('/widget/state', [challenge, challenge, challenge]);
    await vi.advanceTimersByTimeAsync(3000);
    expect(widget.getState().state).toBe('reconnecting');
    expect(visible('c2c-hangup')).toBe(true);
    // again after 3 s, then 6 s, then 12 s (doubling, up to UNREADABLE_POLL_MAX_MS), not every poll_ms
    const at = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(3000);
    expect(service.count('/widget/state')).toBe(at + 1);
    await vi.advanceTimersByTimeAsync(5999);
    expect(service.count('/widget/state')).toBe(at + 1);
    await vi.advanceTimersByTimeAsync(1);
    expect(service.count('/widget/state')).toBe(at + 2);
    await vi.advanceTimersByTimeAsync(12_000);
    expect(service.count('/widget/state')).toBe(at + 3);
    expect(widget.getState().state).toBe('call');
    expect(await widget.hangup()).toMatchObject({ ok: true });
    // and back at poll_ms
    await vi.advanceTimersByTimeAsync(3000);
    expect(service.count('/widget/state')).toBe(at + 4);
  });

  it('the service\'s own refusal of a poll that nothing will mend (not_found: a wrong apiBaseUrl) is state error', async () => {
    await startPolling();
    service.script.set('/widget/state', [{ status: 404, body: { ok: false, error: 'not_found', message: 'Not found.' } }]);
    await vi.advanceTimersByTimeAsync(3000);
    expect(widget.getState().state).toBe('error');
    const polls = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(120_000);
    expect(service.count('/widget/state')).toBe(polls);
  });

  it('a bare 401 on a poll (no envelope: an authenticating proxy) asks the session endpoint again', async () => {
    await startPolling();
    expect(service.count('/crm/session')).toBe(1);
    service.script.set('/widget/state', [{ status: 401, body: undefined }]);
    await vi.advanceTimersByTimeAsync(3000);
    await vi.advanceTimersByTimeAsync(10); // the session endpoint's answer, then the poll with its token
    expect(service.count('/crm/session')).toBe(2);
    expect(widget.getState().state).toBe('ready');
    const last = service.requests.filter((r) => r.path === '/widget/state').at(-1)!;
    expect(last.headers.authorization).toBe('Bearer c2cw_2');
  });

  it('a defect applying a polled state ends the session as an error: it is not taken for no answer, and not polled on', async () => {
    service.realtimeAvailable = false;
    vi.spyOn(Snapshots.prototype, 'offer').mockImplementationOnce(() => {
      throw new TypeError('a defect');
    });
    const states: string[] = [];
    start().on('statechange', (e) => states.push(e.state));
    await flush();
    expect(q('c2c-state').dataset.state).toBe('error');
    expect(states).not.toContain('reconnecting');
    const polls = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(30_000);
    expect(service.count('/widget/state')).toBe(polls);
  });

  it('a poll answered 429 is an answer: the widget waits out Retry-After without saying reconnecting', async () => {
    await startPolling();
    service.script.set('/widget/state', [{ status: 429, body: { ok: false, error: 'rate_limited', message: 'Too many requests.' }, headers: { 'retry-after': '10' } }]);
    const states: string[] = [];
    widget.on('statechange', (e) => states.push(e.state));
    await vi.advanceTimersByTimeAsync(3000);
    const polls = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(9999);
    expect(service.count('/widget/state')).toBe(polls);
    await vi.advanceTimersByTimeAsync(1);
    expect(service.count('/widget/state')).toBe(polls + 1);
    expect(states).not.toContain('reconnecting');
  });

  it('a poll sent before the socket came up, failing after, does not make a later drop of that socket say reconnecting', async () => {
    service.script.set('/widget/state', [{ status: 200, body: service.state() }, 'hang']);
    const states: string[] = [];
    start().on('statechange', (e) => states.push(e.state));
    await flush();
    const socket = service.sockets[0]!;
    await vi.advanceTimersByTimeAsync(3000); // the second poll: on its way, never answered
    expect(service.count('/widget/state')).toBe(2);
    socket.accept(service.state()); // the socket is up: it says how the service is now
    await vi.advanceTimersByTimeAsync(REQUEST_TIMEOUT_MS); // the poll from before gives up
    socket.drop(); // a gateway deploy: the poll it makes is answered
    await vi.advanceTimersByTimeAsync(0);
    expect(states).not.toContain('reconnecting');
    expect(widget.getState().state).toBe('ready');
  });

  it('a poll that failed before the socket came up does not make a later drop of that socket say reconnecting', async () => {
    service.script.set('/widget/state', [{ status: 200, body: service.state() }, 'network']);
    start();
    await flush();
    const socket = service.sockets[0]!;
    await vi.advanceTimersByTimeAsync(3000); // the second poll: no answer
    expect(widget.getState().state).toBe('reconnecting');
    socket.accept(service.state());
    expect(widget.getState().state).toBe('ready');
    await vi.advanceTimersByTimeAsync(60_000);
    const states: string[] = [];
    widget.on('statechange', (e) => states.push(e.state));
    socket.drop(); // a gateway deploy: the poll it makes is answered
    await vi.advanceTimersByTimeAsync(0);
    expect(states).not.toContain('reconnecting');
    expect(widget.getState().state).toBe('ready');
  });
});

describe('endings and tokens', () => {
  it('asks the session endpoint again after a final unauthorized ending, and gives up after a second', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    const refused = { status: 401, body: { ok: false, error: 'unauthorized', message: 'The credential is missing, unknown, expired or revoked.' } };
    service.script.set('/widget/state', [refused, refused, refused]);
    socket.fire('ended', { code: 'unauthorized', final: true, message: 'The widget session ended (revoked).' });
    await flush();
    expect(service.count('/crm/session')).toBe(2);
    const next = service.sockets.at(-1)!;
    expect(next).not.toBe(socket);
    // The new token is refused too (before it ever worked): final.
    next.fire('connect_error', Object.assign(new Error('refused'), { data: { code: 'unauthorized', final: true, message: refused.body.message } }));
    await vi.advanceTimersByTimeAsync(5000);
    expect(q('c2c-state').dataset.state).toBe('unauthorized');
    expect(service.count('/crm/session')).toBe(2);
  });

  it('a refusal of the old token that comes after the new session is not a second refusal: the command goes again with the new token', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const refused = { ok: false, error: 'unauthorized', message: 'The credential is missing, unknown, expired or revoked.' };
    // The command sent with the first token is answered (refused) only once the new session came.
    let answerOldCommand!: () => void;
    const oldCommandHeld = new Promise<void>((resolve) => (answerOldCommand = resolve));
    const send = async (input: string, init: RequestInit = {}) => {
      const auth = (init.headers as Record<string, string> | undefined)?.authorization;
      if (input.endsWith('/widget/commands') && auth === 'Bearer c2cw_1') {
        await oldCommandHeld;
        return new Response(JSON.stringify(refused), { status: 401, headers: { 'content-type': 'application/json' } });
      }
      return service.fetch(input, init);
    };
    start({}, { fetch: send });
    await flush();
    service.sockets[0]!.accept(service.state());
    service.sockets[0]!.drop();
    const muted = outcome(widget.setMuted(true));
    await flush();
    // The token is revoked: the next poll is refused, and the session endpoint gives a new one.
    service.script.set('/widget/state', [{ status: 401, body: refused }]);
    await vi.advanceTimersByTimeAsync(3000);
    expect(service.count('/crm/session')).toBe(2);
    answerOldCommand();
    await vi.advanceTimersByTimeAsync(100);
    expect(muted.value).toMatchObject({ ok: true });
    const retried = service.requests.filter((r) => r.path === '/widget/commands');
    expect(retried.map((r) => r.headers.authorization)).toEqual(['Bearer c2cw_2']);
    expect(retried[0]!.body).toMatchObject({ kind: 'mute' });
    expect(widget.getState().state).toBe('call');
    expect(service.count('/crm/session')).toBe(2);
  });

  it('carries on with the new session after a final ending: push, then reconnects after a drop', async () => {
    start();
    await flush();
    const first = service.sockets[0]!;
    first.accept(service.state());
    first.fire('ended', { code: 'unauthorized', final: true, message: 'The widget session ended (revoked).' });
    await flush();
    const second = service.sockets.at(-1)!;
    expect(second).not.toBe(first);
    second.accept(service.state());
    expect(second.tokens).toEqual(['c2cw_2']);
    expect(q('c2c-state').dataset.state).toBe('ready');
    const connects = second.connects;
    second.drop();
    await vi.advanceTimersByTimeAsync(1000);
    expect(second.connects).toBe(connects + 1);
  });

  it("shows a new session's agent and never the previous agent's call, whatever the versions, and polls without the old ETag", async () => {
    service.version = 50;
    service.set({ call: call('connected', { answered_at: T0 - 5, display: { name: 'Secret Customer', company: 'Acme', number: '+44••••0123', contact_reference: 'crm-42', department: null } }) });
    const socket = await ready();
    expect(service.requests.find((r) => r.path === '/widget/state')?.headers.authorization).toBe('Bearer c2cw_1');
    expect(widget.getState().call?.display.name).toBe('Secret Customer');
    // Ana's token is revoked; the session endpoint now answers for Bob, who logged in on this browser.
    const bob = { name: 'Bob', identifier: 'bob@acme.example', type: 'email' as const, department: 'Support' };
    const bobState: WidgetState = { ...service.state(), version: 7, engine: null, call: null, agent: bob };
    service.script.set('/crm/session', [{ status: 201, body: { ...bobState, widget_token: 'c2cw_bob', expires_at: T0 + 1800 } }]);
    service.script.set('/widget/state', [{ status: 200, body: bobState, headers: { etag: '"7.bob"' } }]);
    const changes: Array<{ state: string; call: Call | null }> = [];
    widget.on('statechange', (change) => changes.push(change));
    socket.fire('ended', { code: 'unauthorized', final: true, message: 'The widget session ended (revoked).' });
    await flush();
    expect(widget.getState()).toMatchObject({ agent: { name: 'Bob' }, call: null });
    expect(q('c2c-call').hidden).toBe(true);
    // Ana's call while her session was being asked again, then never again
    expect(changes.map((c) => [c.state, c.call?.display.name ?? null])).toEqual([
      ['reconnecting', 'Secret Customer'],
      ['offline', null],
    ]);
    // Bob's pushed state (version 7 < 50) is applied
    const { session_expires_at: _, ...pushed } = bobState;
    service.sockets.at(-1)!.accept(pushed as WidgetState);
    expect(widget.getState()).toMatchObject({ state: 'offline', agent: { name: 'Bob' }, call: null });
    // and Bob's first poll asks for his whole state, not with Ana's ETag
    service.sockets.at(-1)!.drop();
    await vi.advanceTimersByTimeAsync(3000);
    const polls = service.requests.filter((r) => r.path === '/widget/state');
    expect(polls.map((r) => r.headers.authorization)).toEqual(['Bearer c2cw_1', 'Bearer c2cw_bob']);
    expect(polls[1]!.headers['if-none-match']).toBeUndefined();
  });

  it("drops a poll answered for the previous session's token: a new session's agent never sees the last agent's call", async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5, display: { name: 'Secret Customer', company: 'Acme', number: '+44••••0123', contact_reference: 'crm-42', department: null } }) });
    // Ana's polls from now on are answered (with her state as it was when asked) only when let go
    let holdAna = false;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    start({}, {
      fetch: async (input, init) => {
        const answer = service.fetch(String(input), init);
        const ana = (init?.headers as Record<string, string> | undefined)?.authorization === 'Bearer c2cw_1';
        if (holdAna && ana && String(input).endsWith('/widget/state')) await held;
        return answer;
      },
    });
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    expect(widget.getState().call?.display.name).toBe('Secret Customer');
    holdAna = true;
    service.set({ engine: engine({ muted: true }) }); // Ana's state moves on: her next poll is answered in full
    socket.drop();
    await vi.advanceTimersByTimeAsync(3000);
    expect(service.requests.filter((r) => r.path === '/widget/state').map((r) => r.headers.authorization)).toEqual(['Bearer c2cw_1', 'Bearer c2cw_1']);
    // Ana's poll is on its way; her session ends, and the session endpoint now answers for Bob
    const bob = { name: 'Bob', identifier: 'bob@acme.example', type: 'email' as const, department: 'Support' };
    const bobState: WidgetState = { ...service.state(), version: 7, engine: null, call: null, agent: bob };
    service.script.set('/crm/session', [{ status: 201, body: { ...bobState, widget_token: 'c2cw_bob', expires_at: T0 + 1800 } }]);
    service.script.set('/widget/state', [{ status: 200, body: bobState, headers: { etag: '"7.bob"' } }]);
    socket.fire('ended', { code: 'unauthorized', final: true, message: 'The widget session ended (revoked).' });
    await flush();
    expect(widget.getState()).toMatchObject({ agent: { name: 'Bob' }, call: null });
    const changes: Array<{ state: string; call: Call | null }> = [];
    widget.on('statechange', (change) => changes.push(change));
    release();
    await flush();
    expect(widget.getState()).toMatchObject({ agent: { name: 'Bob' }, call: null });
    expect(q('c2c-call').hidden).toBe(true);
    expect(changes).toEqual([]);
  });

  it('applies no poll answered after endSession(): no state moves, no event', async () => {
    const release = startHolding('/widget/state');
    await flush();
    service.sockets[0]!.accept(service.state());
    service.sockets[0]!.drop();
    service.set({ call: call('connected', { answered_at: T0 }) });
    await vi.advanceTimersByTimeAsync(3000);
    const changes: Array<{ state: string; call: Call | null }> = [];
    widget.on('statechange', (change) => changes.push(change));
    await widget.endSession();
    expect(widget.getState()).toMatchObject({ state: 'unauthorized', call: null });
    const moved = changes.length;
    release();
    await flush();
    expect(widget.getState()).toMatchObject({ state: 'unauthorized', call: null });
    expect(changes).toHaveLength(moved);
  });

  it('keeps a socket the gateway refuses again with the new token closed while REST accepts it, and tries it once with the next token', async () => {
    start();
    await flush();
    const refuse = (socket: FakeSocket) =>
      socket.fire('connect_error', Object.assign(new Error('refused'), { data: { code: 'origin_not_allowed', final: true, message: 'This origin is not allowed for the integration.' } }));
    refuse(service.sockets[0]!);
    await flush();
    expect(service.count('/crm/session')).toBe(2);
    expect(service.sockets).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(3000); // a poll with the new token works
    refuse(service.sockets[1]!);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(service.count('/crm/session')).toBe(2);
    expect(service.sockets).toHaveLength(2);
    expect(service.count('/widget/state')).toBeGreaterThan(20);
    expect(q('c2c-state').dataset.state).toBe('ready');
    // The refresh's token is tried once on the socket. Refused half an hour after the last
    // refusal, it is judged afresh (REFUSED_AGAIN_WITHIN_MS): the session is asked once more, and
    // that token, refused at once, keeps the socket closed again.
    service.serverTime = T0 + 1740;
    await vi.advanceTimersByTimeAsync(1740_000);
    expect(service.count('/widget/refresh')).toBe(1);
    expect(service.sockets).toHaveLength(3);
    refuse(service.sockets[2]!);
    await flush();
    expect(service.count('/crm/session')).toBe(3);
    expect(service.sockets).toHaveLength(4);
    refuse(service.sockets[3]!);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(service.count('/crm/session')).toBe(3);
    expect(service.sockets).toHaveLength(4);
    expect(q('c2c-state').dataset.state).toBe('ready');
  });

  it('says error on platform_disabled and stops', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    socket.fire('ended', { code: 'platform_disabled', final: true, message: 'The service is disabled platform-wide.' });
    await flush();
    expect(q('c2c-state').dataset.state).toBe('error');
    expect(q('c2c-message').textContent).toBe('The calling service is switched off.');
    const requests = service.requests.length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(service.requests.length).toBe(requests);
    // Said for good: neither the refused command's passing message nor a later click replaces it.
    const later = outcome(widget.setAvailability(true));
    await flush();
    expect(later.error).toBeDefined();
    expect(service.requests.length).toBe(requests);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(q('c2c-state').dataset.state).toBe('error');
    expect(q('c2c-message').textContent).toBe('The calling service is switched off.');
  });

  it.each(['/widget/commands', '/widget/launch-ticket'])('says error on platform_disabled answering %s too, and stops', async (path) => {
    service.set({ engine: null });
    const socket = await ready();
    socket.drop(); // a command goes over REST
    service.script.set(path, [{ status: 403, body: { ok: false, error: 'platform_disabled', message: 'The service is disabled platform-wide.' } }]);
    const asked = path === '/widget/commands' ? outcome(widget.setAvailability(false)) : null;
    if (!asked) widget.enableCalls();
    await flush();
    if (asked) expect(asked.error).toMatchObject({ code: 'platform_disabled' });
    expect(q('c2c-state').dataset.state).toBe('error');
    expect(q('c2c-message').textContent).toBe('The calling service is switched off.');
    const requests = service.requests.length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(service.requests.length).toBe(requests);
    // Said for good: neither the refused command's passing message nor a later click replaces it.
    const later = outcome(widget.setAvailability(true));
    await flush();
    expect(later.error).toBeDefined();
    expect(service.requests.length).toBe(requests);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(q('c2c-state').dataset.state).toBe('error');
    expect(q('c2c-message').textContent).toBe('The calling service is switched off.');
  });

  it('refreshes after token_expired and reconnects with the new token', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    socket.fire('ended', { code: 'token_expired', final: false, message: 'expired' });
    socket.drop('io server disconnect');
    await flush();
    expect(service.count('/widget/refresh')).toBe(1);
    expect(service.requests.find((r) => r.path === '/widget/refresh')!.headers.authorization).toBe('Bearer c2cw_1');
    socket.accept();
    expect(socket.tokens.at(-1)).toBe('c2cw_2');
  });

  it('reconnects with backoff after a retryable ending', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    const connects = socket.connects;
    socket.fire('ended', { code: 'server_restarting', final: false, message: 'restart' });
    socket.drop('io server disconnect');
    await vi.advanceTimersByTimeAsync(500);
    expect(socket.connects).toBe(connects + 1);
    expect(service.count('/widget/refresh')).toBe(0);
  });

  /** A widget pushed to until its token's refresh, 60 s before expiry: its socket reconnects with the new token. */
  async function refreshed() {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    service.serverTime = T0 + 1740;
    await vi.advanceTimersByTimeAsync(1740_000);
    expect(service.count('/widget/refresh')).toBe(1);
    return socket;
  }

  it('refreshes before expiry and reconnects the socket with the new token', async () => {
    const socket = await refreshed();
    socket.accept();
    expect(socket.tokens).toEqual(['c2cw_1', 'c2cw_2']);
    expect(widget.getState().session.expires_at).toBe(T0 + 1740 + 1800);
  });

  it('polls while the socket reconnects with a new token until the gateway accepts it: a slow handshake leaves no gap', async () => {
    const socket = await refreshed();
    const polls = service.count('/widget/state');
    // the gateway has not accepted the new handshake yet: an incoming call comes meanwhile
    service.set({ call: call('incoming', { direction: 'inbound' }) });
    await vi.advanceTimersByTimeAsync(3000);
    expect(service.count('/widget/state')).toBe(polls + 1);
    expect(widget.getState().state).toBe('call');
    // accepted: push again, and the polls stop
    socket.accept(service.state());
    await vi.advanceTimersByTimeAsync(9000);
    expect(service.count('/widget/state')).toBe(polls + 1);
  });
});

describe('commands', () => {

  it('sends commands over the socket with a request_id and the call ref', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    const muted = widget.setMuted(true);
    expect(q('c2c-mute').textContent).toBe('Unmute'); // the effect shows at once
    await flush();
    const sent = socket.sent[0]!;
    expect(sent.event).toBe('command');
    expect(sent.payload).toMatchObject({ kind: 'mute', ref: 'ci_1' });
    expect(sent.payload.request_id).toMatch(/^[0-9a-f-]{32,36}$/);
    sent.ack(null, { ok: true, status: 'queued', command_id: 4 });
    expect(await muted).toMatchObject({ status: 'queued' });
    service.set({ engine: engine({ muted: true }) });
    service.push();
    expect(q('c2c-mute').textContent).toBe('Unmute');
  });

  it('reverts the effect of a refused control, emits commandfailed and shows the reason', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    const failures: unknown[] = [];
    widget.on('commandfailed', (f) => failures.push(f));
    const result = widget.setAvailability(false).catch((e) => e);
    expect(q('c2c-available').getAttribute('aria-pressed')).toBe('false');
    await flush();
    socket.sent[0]!.ack(null, { ok: false, error: 'invalid_state', message: 'The agent has no call window.' });
    expect(await result).toMatchObject({ code: 'invalid_state' });
    expect(failures).toEqual([{ kind: 'availability', error: 'invalid_state', message: 'The agent has no call window.' }]);
    expect(q('c2c-available').getAttribute('aria-pressed')).toBe('true');
    expect(q('c2c-message').textContent).toBe('Not possible in the call’s current state.');
  });

  it('refuses mute and dtmf without a request when the policy does not enable them', async () => {
    service.set({ policy: policy([]), call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    const requests = service.requests.length;
    await expect(widget.setMuted(true)).rejects.toMatchObject({ code: 'control_not_allowed' });
    await expect(widget.sendDigits('12#')).rejects.toMatchObject({ code: 'control_not_allowed' });
    // a malformed argument is the call's own mistake, whatever the policy says (as setMuted('yes'))
    await expect(widget.sendDigits(123 as unknown as string)).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(widget.setMuted('yes' as unknown as boolean)).rejects.toMatchObject({ code: 'invalid_request' });
    expect(socket.sent).toHaveLength(0);
    expect(service.requests.length).toBe(requests);
    expect(visible('c2c-mute')).toBe(false);
    expect(visible('c2c-dtmf')).toBe(false);
    expect(visible('c2c-hangup')).toBe(true);
  });

  it('keeps Unmute for an agent muted when an operator took mute away, and sends it: the agent is never left unheard', async () => {
    service.set({ policy: policy([]), call: call('connected', { answered_at: T0 - 5 }), engine: engine({ muted: true }) });
    const socket = await ready();
    expect(visible('c2c-mute')).toBe(true);
    expect(q('c2c-mute').textContent).toBe('Unmute');
    const unmuted = widget.setMuted(false);
    await flush();
    expect(socket.sent[0]!.payload).toMatchObject({ kind: 'unmute' });
    socket.sent[0]!.ack(null, { ok: true, status: 'queued', command_id: 9 });
    expect(await unmuted).toMatchObject({ status: 'queued' });
    service.set({ engine: engine({ muted: false }) });
    service.push(socket);
    expect(visible('c2c-mute')).toBe(false);
  });

  it('sends a command the socket leaves unanswered over REST, polls while the socket is in doubt, and keeps it once a ping shows it alive', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    await vi.advanceTimersByTimeAsync(SOCKET_SILENT_MS);
    socket.ping(); // alive: the server is slow, not gone
    const polls = service.count('/widget/state');
    const hangup = widget.hangup();
    await flush();
    expect(socket.sent).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(ACK_TIMEOUT_MS + 1000);
    expect(await hangup).toMatchObject({ ok: true });
    const posts = service.requests.filter((r) => r.path === '/widget/commands');
    expect(posts).toHaveLength(1);
    expect(posts[0]!.body.request_id).toBe(socket.sent[0]!.payload.request_id);
    // in doubt: still connected, but the widget polls, and the next command goes over REST at once
    expect(socket.connected).toBe(true);
    expect(service.count('/widget/state')).toBeGreaterThan(polls);
    await widget.setMuted(true);
    expect(socket.sent).toHaveLength(1);
    // a ping: the socket is trusted again, polling stops, and commands go on it
    socket.ping();
    await vi.advanceTimersByTimeAsync(SOCKET_SILENT_MS);
    const quiet = service.count('/widget/state');
    socket.ping();
    await vi.advanceTimersByTimeAsync(6000);
    expect(service.count('/widget/state')).toBe(quiet);
    expect(socket.connected).toBe(true);
    void widget.setMuted(false);
    await flush();
    expect(socket.sent).toHaveLength(2);
  });

  it('closes a socket in doubt that stays silent until SOCKET_SILENT_MS after it was last heard', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    await vi.advanceTimersByTimeAsync(2000);
    socket.ping();
    const hangup = widget.hangup();
    await vi.advanceTimersByTimeAsync(ACK_TIMEOUT_MS + 1000);
    expect(await hangup).toMatchObject({ ok: true });
    expect(socket.connected).toBe(true); // heard 6 s ago: in doubt, not yet dead
    await vi.advanceTimersByTimeAsync(SOCKET_SILENT_MS - ACK_TIMEOUT_MS - 1000);
    expect(socket.connected).toBe(false);
  });

  it('takes a connection that carried nothing, not even a ping, for 12.5 s for dead once a command goes unanswered: closes it, polls, and reconnects', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    const connects = socket.connects;
    await vi.advanceTimersByTimeAsync(SOCKET_SILENT_MS - ACK_TIMEOUT_MS);
    const polls = service.count('/widget/state');
    const hangup = widget.hangup();
    await flush();
    // the connection died without a word: the socket still looks connected, and nothing answers
    await vi.advanceTimersByTimeAsync(ACK_TIMEOUT_MS + 1000);
    expect(await hangup).toMatchObject({ ok: true });
    expect(service.requests.filter((r) => r.path === '/widget/commands')).toHaveLength(1);
    expect(socket.connected).toBe(false);
    expect(service.count('/widget/state')).toBeGreaterThan(polls);
    // a new connection is under way (after a backoff)
    expect(socket.connects).toBeGreaterThan(connects);
    // once it is up, pushes are trusted again and commands go on it, not over REST
    socket.accept(service.state());
    const posts = service.count('/widget/commands');
    const muted = widget.setMuted(true);
    await flush();
    expect(socket.sent).toHaveLength(2);
    socket.sent[1]!.ack(null, { ok: true, status: 'queued', command_id: 12 });
    expect(await muted).toMatchObject({ ok: true });
    expect(service.count('/widget/commands')).toBe(posts);
    const quiet = service.count('/widget/state');
    await vi.advanceTimersByTimeAsync(9000);
    expect(service.count('/widget/state')).toBe(quiet);
  });

  it('posts commands when the socket is down and retries a network failure with the same request_id', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    socket.drop();
    service.script.set('/widget/commands', ['network', { status: 503, body: { ok: false, error: 'service_unavailable', message: 'retry' } }]);
    const digits = widget.sendDigits('5');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(await digits).toMatchObject({ ok: true });
    const posts = service.requests.filter((r) => r.path === '/widget/commands');
    expect(posts).toHaveLength(3);
    expect(new Set(posts.map((p) => p.body.request_id)).size).toBe(1);
    expect(posts[0]!.body).toMatchObject({ kind: 'dtmf', digits: '5' });
  });

  it('sends keypad digits and mute toggles one at a time, in the order pressed, even when one needs a retry', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    // what reaches the service, in order; the first attempt of "2" gets no answer
    const sent: string[] = [];
    let failedOnce = false;
    const send = (input: string, init: RequestInit = {}) => {
      const body = typeof init.body === 'string' ? JSON.parse(init.body) : null;
      if (body?.kind === 'dtmf' && body.digits === '2' && !failedOnce) {
        failedOnce = true;
        return Promise.reject(new TypeError('Failed to fetch'));
      }
      if (body?.kind) sent.push(body.kind === 'dtmf' ? body.digits : body.kind);
      return service.fetch(input, init);
    };
    start({}, { fetch: send });
    await flush();
    service.sockets[0]!.accept(service.state());
    service.sockets[0]!.drop();
    const presses = [widget.sendDigits('1'), widget.sendDigits('2'), widget.sendDigits('3'), widget.setMuted(true), widget.setMuted(false), widget.hangup()];
    await vi.advanceTimersByTimeAsync(10_000);
    for (const p of presses) expect(await p).toMatchObject({ ok: true });
    // the hangup did not wait behind them; the others went in order
    expect(sent.filter((k) => k !== 'hangup')).toEqual(['1', '2', '3', 'mute', 'unmute']);
    expect(sent.indexOf('hangup')).toBeLessThan(sent.indexOf('3'));
  });

  /** A connected call, its socket down, and no command POST ever answered; returns the commandfailed events. */
  async function onCallNothingAnswers() {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    socket.drop();
    service.script.set('/widget/commands', Array(COMMAND_ATTEMPTS).fill('hang'));
    const failures: Array<{ kind: string; error: string }> = [];
    widget.on('commandfailed', (f) => failures.push(f));
    return failures;
  }

  it('a digit held behind one nothing answers fails unsent after ORDERED_WAIT_MS rather than reach the call late', async () => {
    const failures = await onCallNothingAnswers();
    const first = outcome(widget.sendDigits('1'));
    const second = outcome(widget.sendDigits('2'));
    await vi.advanceTimersByTimeAsync(ORDERED_WAIT_MS - 1);
    expect(second.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(second.error).toMatchObject({ code: 'unreachable' });
    expect(failures).toEqual([expect.objectContaining({ kind: 'dtmf', error: 'unreachable' })]);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(first.error).toMatchObject({ code: 'unreachable' });
    // "2" never went: every request was "1"'s
    const posts = service.requests.filter((r) => r.path === '/widget/commands');
    expect(posts.length).toBe(COMMAND_ATTEMPTS);
    expect(new Set(posts.map((p) => p.body.digits))).toEqual(new Set(['1']));
  });

  it('gives up a command POST never answered after ACK_TIMEOUT_MS and sends it again; a hangup nothing answers is reported hangup_uncertain', async () => {
    const failures = await onCallNothingAnswers();
    const result = outcome(widget.hangup());
    await vi.advanceTimersByTimeAsync(ACK_TIMEOUT_MS);
    const posts = () => service.requests.filter((r) => r.path === '/widget/commands');
    expect(posts()[0]!.signal?.aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(result.error).toMatchObject({ code: 'hangup_uncertain' });
    expect(posts()).toHaveLength(COMMAND_ATTEMPTS);
    expect(new Set(posts().map((p) => p.body.request_id)).size).toBe(1);
    expect(failures).toEqual([{ kind: 'hangup', error: 'hangup_uncertain', message: expect.any(String) }]);
  });

  it('drops a command with no session within SESSION_WAIT_MS (unreachable; hangup_uncertain for a hangup), undoes its effect, and never sends it later', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    const failures: Array<{ kind: string; error: string }> = [];
    widget.on('commandfailed', (f) => failures.push({ kind: f.kind, error: f.error }));
    // the token is revoked, and the session endpoint does not answer for a long while
    const refused = { status: 401, body: { ok: false, error: 'unauthorized', message: 'The credential is missing, unknown, expired or revoked.' } };
    service.script.set('/crm/session', Array(100).fill('network'));
    service.script.set('/widget/state', Array(100).fill(refused));
    socket.fire('ended', { code: 'unauthorized', final: true, message: 'The widget session ended (revoked).' });
    await flush();
    const muted = outcome(widget.setMuted(true));
    const hungUp = outcome(widget.hangup());
    expect(widget.getState().engine?.muted).toBe(true);
    await vi.advanceTimersByTimeAsync(SESSION_WAIT_MS - 1);
    expect(failures).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(muted.error).toMatchObject({ code: 'unreachable' });
    expect(hungUp.error).toMatchObject({ code: 'hangup_uncertain' });
    expect(failures).toEqual([{ kind: 'mute', error: 'unreachable' }, { kind: 'hangup', error: 'hangup_uncertain' }]);
    expect(widget.getState().engine?.muted).toBe(false);
    // the session endpoint answers again, minutes later: neither command goes
    await vi.advanceTimersByTimeAsync(300_000);
    service.script.set('/crm/session', []);
    service.script.set('/widget/state', []);
    await vi.advanceTimersByTimeAsync(60_000);
    const latest = service.sockets.at(-1)!;
    expect(latest).not.toBe(socket);
    latest.accept(service.state());
    await vi.advanceTimersByTimeAsync(10_000);
    expect(service.count('/widget/commands')).toBe(0);
    expect(service.sockets.flatMap((s) => s.sent)).toEqual([]);
  });

  it('drops a command whose token was refused when the new session does not come within SESSION_WAIT_MS', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    socket.drop();
    const refused = { status: 401, body: { ok: false, error: 'unauthorized', message: 'The credential is missing, unknown, expired or revoked.' } };
    service.script.set('/widget/commands', [refused]);
    service.script.set('/crm/session', Array(100).fill('network'));
    const muted = outcome(widget.setMuted(true));
    await vi.advanceTimersByTimeAsync(SESSION_WAIT_MS);
    expect(muted.error).toMatchObject({ code: 'unreachable' });
    service.script.set('/crm/session', []);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(service.count('/widget/commands')).toBe(1);
  });

  it("never sends a command made for one agent with the session of another who signed in on this browser meanwhile (availability names no call)", async () => {
    const socket = await ready();
    socket.drop();
    const refused = { status: 401, body: { ok: false, error: 'unauthorized', message: 'The credential is missing, unknown, expired or revoked.' } };
    service.script.set('/widget/commands', [refused]);
    const bob = { name: 'Bob', identifier: 'bob@acme.example', type: 'email' as const, department: 'Support' };
    const bobState: WidgetState = { ...service.state(), version: 7, engine: null, call: null, agent: bob };
    service.script.set('/crm/session', [{ status: 201, body: { ...bobState, widget_token: 'c2cw_bob', expires_at: T0 + 1800 } }]);
    const failures: Array<{ kind: string; error: string }> = [];
    widget.on('commandfailed', (f) => failures.push({ kind: f.kind, error: f.error }));
    // Ana clicks Not available; her token was revoked, and the session endpoint now answers for Bob
    const unavailable = outcome(widget.setAvailability(false));
    await vi.advanceTimersByTimeAsync(1000);
    expect(unavailable.error).toMatchObject({ code: 'agent_changed' });
    expect(failures).toEqual([{ kind: 'availability', error: 'agent_changed' }]);
    expect(q('c2c-message').textContent).toBe(''); // nothing Bob did to be told of
    const sent = service.requests.filter((r) => r.path === '/widget/commands');
    expect(sent.map((r) => r.headers.authorization)).toEqual(['Bearer c2cw_1']);
    expect(widget.getState()).toMatchObject({ agent: { name: 'Bob' } });
    // Bob's own commands go
    expect(await widget.setAvailability(true)).toMatchObject({ ok: true });
    expect(service.requests.filter((r) => r.path === '/widget/commands').at(-1)!.headers.authorization).toBe('Bearer c2cw_bob');
  });

  it('offers only Hang up on an orphaned connected call, even with its window still live: mute and the keypad would act on nothing', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    expect(visible('c2c-mute')).toBe(true);
    expect(visible('c2c-dtmf')).toBe(true);
    service.set({ call: call('connected', { answered_at: T0 - 5, orphaned: true }) });
    service.push(socket);
    expect(visible('c2c-hangup')).toBe(true);
    expect(visible('c2c-mute')).toBe(false);
    expect(visible('c2c-dtmf')).toBe(false);
  });

  it('reports a 502 hangup as hangup_uncertain and keeps offering Hang up', async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5, orphaned: true }), engine: engine({ state: 'closed', live: false }) });
    const socket = await ready();
    socket.drop();
    expect(visible('c2c-hangup')).toBe(true); // orphaned: the window is gone, the server can still end it
    service.script.set('/widget/commands', [{ status: 502, body: { ok: false, error: 'hangup_uncertain', message: 'provider down' } }]);
    const failures: Array<{ error: string }> = [];
    widget.on('commandfailed', (f) => failures.push(f));
    const result = widget.hangup().catch((e) => e);
    expect(q('c2c-call-status').textContent).toBe('Ending the call…');
    expect(await result).toMatchObject({ code: 'hangup_uncertain' });
    expect(failures.map((f) => f.error)).toEqual(['hangup_uncertain']);
    expect(visible('c2c-hangup')).toBe(true);
    expect(q('c2c-message').textContent).toContain('may still be up');
    // Trying again is a new command (the server replays a request_id's first answer).
    void widget.hangup();
    await flush();
    const ids = service.requests.filter((r) => r.path === '/widget/commands').map((r) => r.body.request_id);
    expect(new Set(ids).size).toBe(2);
  });
});

describe('requestCall and the 30 s rule', () => {
  it('resolves with the backend JSON, emits callrequested, and is satisfied when the call appears', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    const requested: unknown[] = [];
    widget.on('callrequested', (r) => requested.push(r));
    const answer = await widget.requestCall({ contact_reference: 'crm-42' });
    expect(answer).toMatchObject({ ok: true, request_id: 'ci_new' });
    expect(requested).toEqual([answer]);
    const post = service.requests.find((r) => r.path === '/crm/call')!;
    expect(post.body).toEqual({ contact_reference: 'crm-42' });
    expect(post.headers['x-csrf-token']).toBe('csrf-1');
    service.set({ call: call('queued', { request_id: 'ci_new', call_id: 'ci_new' }) });
    service.push();
    await vi.advanceTimersByTimeAsync(31_000);
    expect(q('c2c-message').hidden).toBe(true);
  });

  it("says 'The call did not start' when no call appears within 30 s (a backend that always answers 200)", async () => {
    start();
    await flush();
    service.sockets[0]!.accept(service.state());
    service.script.set('/crm/call', [{ status: 200, body: { ok: true } }]);
    await widget.requestCall({ contact_reference: 'crm-42' });
    await vi.advanceTimersByTimeAsync(29_900);
    expect(q('c2c-message').hidden).toBe(true);
    await vi.advanceTimersByTimeAsync(200);
    expect(q('c2c-message').textContent).toBe('The call did not start');
    expect(visible('c2c-message')).toBe(true);
  });

  it('counts a call that appeared before the backend answered', async () => {
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    service.script.set('/crm/call', [{ status: 200, body: { ok: true } }]);
    const pending = widget.requestCall({});
    service.set({ call: call('dialing', { request_id: 'ci_9', call_id: 'ci_9' }) });
    service.push();
    await pending;
    await vi.advanceTimersByTimeAsync(31_000);
    expect(q('c2c-message').textContent).not.toBe('The call did not start');
  });

  it('shows a refusal at once, resolving with the JSON the backend passed through', async () => {
    start();
    await flush();
    service.script.set('/crm/call', [{ status: 409, body: { ok: false, error: 'agent_offline', message: 'The agent has no live call window.' } }]);
    const answer = await widget.requestCall({ contact_reference: 'x' });
    expect(answer).toEqual({ ok: false, error: 'agent_offline', message: 'The agent has no live call window.' });
    expect(q('c2c-message').textContent).toBe('Open the call window first (Enable calls).');
    await vi.advanceTimersByTimeAsync(31_000);
    expect(q('c2c-message').textContent).not.toBe('The call did not start');
  });

  it("takes an error status whose body is the CRM's own (no envelope) for the refusal it is, at once", async () => {
    start();
    await flush();
    const requested: unknown[] = [];
    widget.on('callrequested', (body) => requested.push(body));
    service.script.set('/crm/call', [{ status: 419, body: { message: 'CSRF token mismatch.' } }]);
    const answer = await widget.requestCall({ contact_reference: 'x' });
    expect(answer).toEqual({ ok: false, error: 'http_419', message: 'CSRF token mismatch.' });
    expect(requested).toEqual([answer]);
    expect(q('c2c-message').textContent).toBe('Something went wrong; try again.');
    await vi.advanceTimersByTimeAsync(31_000);
    expect(q('c2c-message').textContent).not.toBe('The call did not start');
  });

  it("says a CRM's own server error is its error, not that nothing answered, and gives a refusal without a code one", async () => {
    start();
    await flush();
    service.script.set('/crm/call', [{ status: 500, body: { message: 'Server Error' } }]);
    expect(await widget.requestCall({ contact_reference: 'x' })).toEqual({ ok: false, error: 'http_500', message: 'Server Error' });
    expect(q('c2c-message').textContent).toBe('Something went wrong; try again.');
    service.script.set('/crm/call', [{ status: 403, body: { ok: false, message: 'Not your contact.' } }]);
    expect(await widget.requestCall({ contact_reference: 'x' })).toEqual({ ok: false, error: 'http_403', message: 'Not your contact.' });
  });
});

describe('the call timer', () => {
  it("shows the server's duration and advances with local time since the snapshot, not from the browser's clock", async () => {
    service.serverTime = T0 + 42;
    service.set({ call: call('connected', { answered_at: T0 }) });
    start();
    await flush();
    service.sockets[0]!.accept(service.state());
    expect(q('c2c-timer').textContent).toBe('00:42');
    await vi.advanceTimersByTimeAsync(3000);
    expect(q('c2c-timer').textContent).toBe('00:45');
    // The next snapshot re-anchors on the server's clock.
    service.serverTime = T0 + 100;
    service.set({ engine: engine({ muted: true }) });
    service.push();
    expect(q('c2c-timer').textContent).toBe('01:40');
  });

  it('has no timer before the answer', async () => {
    service.set({ call: call('ringing') });
    start();
    await flush();
    expect(visible('c2c-timer')).toBe(false);
    expect(q('c2c-call-status').textContent).toBe('Ringing…');
  });
});

describe('enableCalls', () => {
  it('opens the popup synchronously, then navigates it to window_url and remembers window_name', async () => {
    service.set({ engine: null });
    start();
    await flush();
    expect(q('c2c-state').dataset.state).toBe('offline');
    expect(widget.enableCalls()).toBe(true);
    expect(opened).toHaveLength(1);
    expect(opened[0]!.features).toContain('popup');
    expect(q('c2c-state').dataset.state).toBe('enabling');
    await flush();
    const win = opened[0]!.win;
    expect(win.name).toBe('c2c_abcdef');
    expect(win.location.replace).toHaveBeenCalledWith('https://c2c.example/click2call/window#ticket=c2cl_t&lang=en');
    expect(store.get('c2c.window.c2c_demo.ana@acme.example')).toBe('c2c_abcdef');
  });

  it('brings forward the window on its way, before its ticket named it, instead of opening a second one (a double click)', async () => {
    service.set({ engine: null });
    start();
    await flush();
    expect(widget.enableCalls()).toBe(true);
    const win = opened[0]!.win;
    expect(widget.enableCalls()).toBe(true); // before the ticket came back
    expect(opened).toHaveLength(1);
    expect(win.focus).toHaveBeenCalled();
    await flush();
    expect(win.location.replace).toHaveBeenCalledTimes(1);
    // closed by the agent before it was ready, the next click opens a new one
    win.closed = true;
    widget.enableCalls();
    expect(opened).toHaveLength(2);
  });

  it("opens the window as the integration's setting says, unless init()'s windowMode overrides it", async () => {
    service.set({ engine: null });
    service.policy = policy(['mute'], { widget: { position: 'bottom-right', language: 'en', window_mode: 'tab' } });
    start();
    await flush();
    widget.enableCalls();
    expect(opened[0]!.features).toBeUndefined();
    widget.detach();
    opened.length = 0;
    start({ windowMode: 'popup' });
    await flush();
    widget.enableCalls();
    expect(opened[0]!.features).toContain('popup');
  });

  it('opens a popup for a mode this version cannot open (extension, frame shell), and warns the developer once', async () => {
    service.set({ engine: null });
    const warnings: string[] = [];
    start({ windowMode: 'extension' }, { warn: (message) => warnings.push(message) });
    await flush();
    widget.enableCalls();
    widget.enableCalls();
    expect(opened[0]!.features).toContain('popup');
    expect(warnings).toEqual([expect.stringContaining("cannot open as 'extension' in this version (init()'s windowMode); it opens as a popup")]);
    widget.detach();
    opened.length = 0;
    service.policy = policy(['mute'], { widget: { position: 'bottom-right', language: 'en', window_mode: 'frame-shell' } });
    start({}, { warn: (message) => warnings.push(message) });
    await flush();
    widget.enableCalls();
    expect(opened[0]!.features).toContain('popup');
    expect(warnings[1]).toContain("cannot open as 'frame-shell' in this version (the integration's setting)");
  });

  it('goes back to offline when the opened window is closed before it is ready, or never gets ready', async () => {
    service.set({ engine: null });
    start();
    await flush();
    widget.enableCalls();
    await flush();
    expect(q('c2c-state').dataset.state).toBe('enabling');
    expect(visible('c2c-enable')).toBe(false);
    opened[0]!.win.closed = true;
    await vi.advanceTimersByTimeAsync(1000);
    expect(q('c2c-state').dataset.state).toBe('offline');
    expect(visible('c2c-enable')).toBe(true);
    widget.enableCalls();
    await vi.advanceTimersByTimeAsync(59_000);
    expect(q('c2c-state').dataset.state).toBe('enabling');
    await vi.advanceTimersByTimeAsync(1000);
    expect(q('c2c-state').dataset.state).toBe('offline');
  });

  it('says enabling until the new window is ready, through its enabling state', async () => {
    service.set({ engine: null });
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    widget.enableCalls();
    await flush();
    service.set({ engine: engine({ state: 'enabling', mic_ready: false }) });
    service.push();
    expect(q('c2c-state').dataset.state).toBe('enabling');
    service.set({ engine: engine() });
    service.push();
    expect(q('c2c-state').dataset.state).toBe('ready');
    // Later, a window without a microphone is no_mic (not enabling): Enable calls brings it forward.
    service.set({ engine: engine({ state: 'enabling', mic_ready: false }) });
    service.push();
    expect(q('c2c-state').dataset.state).toBe('no_mic');
    expect(q('c2c-state').textContent).toBe('Microphone not ready');
    expect(visible('c2c-enable')).toBe(true);
    // With the microphone granted, it is the window's voice line that is not up: said so.
    service.set({ engine: engine({ state: 'enabling', mic_ready: true }) });
    service.push();
    expect(q('c2c-state').dataset.state).toBe('no_mic');
    expect(q('c2c-state').textContent).toBe('Call window not ready');
  });

  it('says what the paired window waits for (its microphone) once it has had PAIRED_WAIT_MS to become ready, not "opening" for a minute', async () => {
    service.set({ engine: null });
    const socket = await ready();
    widget.enableCalls();
    await flush();
    // Paired, asking for the microphone: still opening.
    service.set({ engine: engine({ state: 'enabling', mic_ready: false }) });
    service.push(socket);
    await vi.advanceTimersByTimeAsync(PAIRED_WAIT_MS - 1000);
    expect(q('c2c-state').dataset.state).toBe('enabling');
    // The agent blocked it (or left the prompt open): the widget says so, and offers Enable calls.
    await vi.advanceTimersByTimeAsync(1000);
    expect(q('c2c-state').dataset.state).toBe('no_mic');
    expect(visible('c2c-enable')).toBe(true);
  });

  it('brings a live window to the front instead of opening a second one', async () => {
    store.set('c2c.window.c2c_demo.ana@acme.example', 'c2c_abcdef');
    const live = { closed: false, focus: vi.fn(), get location(): never { throw new DOMException('cross-origin', 'SecurityError'); } };
    openResult = (target) => (target === 'c2c_abcdef' ? live : blankWindow());
    start();
    await flush();
    service.sockets[0]!.accept(service.state());
    expect(widget.enableCalls()).toBe(true);
    expect(opened.map((o) => [o.url, o.target])).toEqual([['', 'c2c_abcdef']]);
    expect(live.focus).toHaveBeenCalled();
    await flush();
    expect(service.count('/widget/launch-ticket')).toBe(0);
    expect(service.sockets[0]!.sent[0]!.payload).toMatchObject({ kind: 'focus' });
  });

  it('gives a call window that stopped a new ticket, in that window, and only brings forward one still pairing', async () => {
    store.set('c2c.window.c2c_demo.ana@acme.example', 'c2c_abcdef');
    service.set({ engine: null }); // the window was reloaded: its engine closed, it asks to be opened again
    const stopped = {
      closed: false,
      focus: vi.fn(),
      close: vi.fn(),
      location: {
        replace: vi.fn(),
        get href(): never {
          throw new DOMException('cross-origin', 'SecurityError');
        },
      },
      set name(_: string) {
        throw new DOMException('cross-origin', 'SecurityError');
      },
    };
    openResult = (target) => (target === 'c2c_abcdef' ? stopped : blankWindow());
    start();
    await flush();
    expect(widget.enableCalls()).toBe(true);
    expect(opened.map((o) => o.target)).toEqual(['c2c_abcdef']);
    expect(stopped.focus).toHaveBeenCalled();
    expect(q('c2c-state').dataset.state).toBe('enabling');
    await flush();
    expect(service.count('/widget/launch-ticket')).toBe(1);
    expect(stopped.location.replace).toHaveBeenCalledWith('https://c2c.example/click2call/window#ticket=c2cl_t&lang=en');
    // Clicked again while that window pairs: brought forward, no second ticket.
    expect(widget.enableCalls()).toBe(true);
    await flush();
    expect(service.count('/widget/launch-ticket')).toBe(1);
    expect(stopped.focus).toHaveBeenCalledTimes(2);
    // Ten seconds on and still no live engine, the pairing failed (its ticket refused, say): another.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(widget.enableCalls()).toBe(true);
    await flush();
    expect(service.count('/widget/launch-ticket')).toBe(2);
    expect(stopped.location.replace).toHaveBeenCalledTimes(2);
    expect(stopped.close).not.toHaveBeenCalled();
  });

  it('keeps the found window open when its new ticket cannot be had', async () => {
    store.set('c2c.window.c2c_demo.ana@acme.example', 'c2c_abcdef');
    service.set({ engine: null });
    const stopped = { closed: false, focus: vi.fn(), close: vi.fn(), location: { href: 'https://c2c.example/click2call/window', replace: vi.fn() } };
    openResult = () => stopped;
    const refused = { status: 403, body: { ok: false, error: 'agent_disabled', message: 'This agent is switched off.' } };
    service.script.set('/widget/launch-ticket', [refused, refused]); // refused again after a new session
    start();
    await flush();
    widget.enableCalls();
    await flush();
    expect(stopped.close).not.toHaveBeenCalled();
    expect(stopped.location.replace).not.toHaveBeenCalled();
    expect(q('c2c-message').textContent).toBe('Calls are disabled for you.');
  });

  it('works with a sessionEndpoint that answers only widget_token and expires_at', async () => {
    service.set({ engine: null });
    service.script.set('/crm/session', [{ status: 201, body: { widget_token: 'c2cw_min', expires_at: T0 + 1800 } }]);
    start();
    await flush();
    expect(service.requests.find((r) => r.path === '/widget/state')?.headers.authorization).toBe('Bearer c2cw_min');
    expect(widget.enableCalls()).toBe(true);
    await flush();
    // The agent came from the WidgetState: the window's name is remembered for that agent.
    expect(store.get('c2c.window.c2c_demo.ana@acme.example')).toBe('c2c_abcdef');
  });

  it('remembers the window name when its ticket came before anything named the agent (a sessionEndpoint naming none, no state yet)', async () => {
    service.set({ engine: null });
    service.script.set('/crm/session', [{ status: 201, body: { widget_token: 'c2cw_min', expires_at: T0 + 1800 } }]);
    service.script.set('/widget/state', ['network']);
    start();
    await flush();
    expect(widget.enableCalls()).toBe(true);
    await flush();
    expect(opened[0]!.win.name).toBe('c2c_abcdef');
    expect(store.get('c2c.window.c2c_demo.ana@acme.example')).toBeUndefined(); // whose window it is is not known yet
    await vi.advanceTimersByTimeAsync(5000); // the state poll is retried: the first state names Ana
    expect(widget.getState().agent?.name).toBe('Ana');
    expect(store.get('c2c.window.c2c_demo.ana@acme.example')).toBe('c2c_abcdef');
  });

  it('remembers the window name when enableCalls() came before the session named the agent, and brings that window forward later', async () => {
    service.engine = null;
    start();
    expect(widget.enableCalls()).toBe(true); // the session has not answered yet
    await flush();
    expect(store.get('c2c.window.c2c_demo.ana@acme.example')).toBe('c2c_abcdef');
    const win = opened[0]!.win;
    win.location.href = 'https://c2c.example/click2call/window';
    // the window paired; its microphone is not ready yet, so Enable calls is still offered
    service.set({ engine: engine({ state: 'ready', live: true, mic_ready: false }) });
    service.sockets[0]!.accept(service.state());
    await vi.advanceTimersByTimeAsync(61_000);
    expect(visible('c2c-enable')).toBe(true);
    // the window this page holds is brought forward, whatever the name lookup gives
    widget.enableCalls();
    await flush();
    expect(win.focus).toHaveBeenCalled();
    expect(q('c2c-message').textContent).toBe('');
    await vi.advanceTimersByTimeAsync(2000);
    widget.enableCalls();
    await flush();
    expect(opened).toHaveLength(1);
    expect(service.count('/widget/launch-ticket')).toBe(1);
  });

  /** A tab-mode widget whose window the browser blocked: it shows the 'Open in new tab' link. */
  async function blockedWithTabLink() {
    service.set({ engine: null });
    openResult = () => null;
    start({ windowMode: 'tab' });
    await flush();
    widget.enableCalls();
    await flush();
    expect(visible('c2c-open-tab')).toBe(true);
  }

  it("offers an 'Open in new tab' link when the popup is blocked", async () => {
    service.set({ engine: null });
    openResult = () => null;
    start({ windowMode: 'tab' });
    await flush();
    expect(widget.enableCalls()).toBe(false);
    expect(opened[0]!.features).toBeUndefined();
    await flush();
    const link = q('c2c-open-tab') as HTMLAnchorElement;
    expect(visible('c2c-open-tab')).toBe(true);
    expect(link.href).toBe('https://c2c.example/click2call/window#ticket=c2cl_t&lang=en');
    expect(link.target).toBe('c2c_abcdef');
    link.addEventListener('click', (e) => e.preventDefault()); // happy-dom would navigate
    link.click();
    expect(visible('c2c-open-tab')).toBe(false);
    expect(q('c2c-state').dataset.state).toBe('enabling');
  });

  it("takes the 'Open in new tab' link away when the session ends for good, and keeps saying why", async () => {
    await blockedWithTabLink();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    await flush();
    socket.fire('ended', { code: 'platform_disabled', final: true, message: 'The service is disabled platform-wide.' });
    await flush();
    expect(q('c2c-state').dataset.state).toBe('error');
    expect(visible('c2c-open-tab')).toBe(false); // a window it opened could only be refused
    expect(q('c2c-message').textContent).toBe('The calling service is switched off.');
  });

  it("takes the 'Open in new tab' link away as soon as a logout starts, and does not follow it meanwhile", async () => {
    await blockedWithTabLink();
    service.script.set('/widget/revoke', ['hang']); // the revoke takes its time
    const ending = widget.endSession();
    await flush();
    expect(visible('c2c-open-tab')).toBe(false);
    // a click that got there first (the link as rendered a moment before) opens nothing
    const click = new MouseEvent('click', { bubbles: true, cancelable: true });
    q('c2c-open-tab').dispatchEvent(click);
    expect(click.defaultPrevented).toBe(true);
    expect(q('c2c-state').dataset.state).not.toBe('enabling');
    await vi.advanceTimersByTimeAsync(10_000);
    await ending;
  });

  it.each([
    ['opened', (): unknown => blankWindow()],
    ['blocked', (): unknown => null],
  ] as const)("lets a launch ticket answered after endSession() start nothing (popup %s): the window it opened closes, no link, no message", async (_, result) => {
    service.set({ engine: null });
    openResult = result;
    let release!: () => void;
    service.held.set('/widget/launch-ticket', new Promise<void>((resolve) => (release = resolve)));
    start();
    await flush();
    widget.enableCalls();
    await flush();
    await widget.endSession();
    release();
    await flush();
    const win = opened[0]!.win;
    if (win) {
      expect(win.location.replace).not.toHaveBeenCalled();
      expect(win.close).toHaveBeenCalled();
    }
    expect(visible('c2c-open-tab')).toBe(false);
    expect(q('c2c-message').textContent).toBe('');
    expect(vi.getTimerCount(), 'no timer left running for a message').toBe(0);
  });

  it("takes the 'Open in new tab' link away when its ticket expires", async () => {
    await blockedWithTabLink();
    await vi.advanceTimersByTimeAsync(600_000 - 1000);
    expect(visible('c2c-open-tab')).toBe(true);
    await vi.advanceTimersByTimeAsync(1000); // the ticket's expires_in (600 s)
    expect(visible('c2c-open-tab')).toBe(false);
    expect(q('c2c-message').textContent).toBe('');
  });

  it("drops the previous agent's 'Open in new tab' link and window being paired when a new session is another agent's", async () => {
    await blockedWithTabLink();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    await flush();
    const bob = { name: 'Bob', identifier: 'bob@acme.example', type: 'email' as const, department: 'Support' };
    const bobState: WidgetState = { ...service.state(), version: 7, engine: null, call: null, agent: bob };
    service.script.set('/crm/session', [{ status: 201, body: { ...bobState, widget_token: 'c2cw_bob', expires_at: T0 + 1800 } }]);
    socket.fire('ended', { code: 'unauthorized', final: true, message: 'The widget session ended (revoked).' });
    await flush();
    expect(widget.getState()).toMatchObject({ agent: { name: 'Bob' } });
    expect(visible('c2c-open-tab')).toBe(false); // its ticket was Ana's
    expect(q('c2c-state').dataset.state).toBe('offline'); // not still enabling Ana's window
  });

  it("drops them too when the new session does not name its agent (a backend passing on only the token), once Bob's first state comes", async () => {
    await blockedWithTabLink();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    await flush();
    const bob = { name: 'Bob', identifier: 'bob@acme.example', type: 'email' as const, department: 'Support' };
    const bobState: WidgetState = { ...service.state(), version: 7, engine: null, call: null, agent: bob };
    service.script.set('/crm/session', [{ status: 201, body: { widget_token: 'c2cw_bob', expires_at: T0 + 1800 } as never }]);
    socket.fire('ended', { code: 'unauthorized', final: true, message: 'The widget session ended (revoked).' });
    await flush();
    expect(visible('c2c-open-tab')).toBe(true); // nothing says yet whose the session is
    const { session_expires_at: _, ...pushed } = bobState;
    service.sockets.at(-1)!.accept(pushed as WidgetState);
    await flush();
    expect(widget.getState()).toMatchObject({ agent: { name: 'Bob' } });
    expect(visible('c2c-open-tab')).toBe(false); // its ticket was Ana's
    expect(q('c2c-state').dataset.state).toBe('offline');
  });

  it('falls back to the focus command for a live window its name does not reach (opened from an unrelated tab)', async () => {
    store.set('c2c.window.c2c_demo.ana@acme.example', 'c2c_abcdef');
    const blank = blankWindow(); // what open('', name) gives when no related window has that name
    openResult = () => blank;
    start();
    await flush();
    service.sockets[0]!.accept(service.state());
    expect(widget.enableCalls()).toBe(true);
    expect(blank.close).toHaveBeenCalled();
    await flush();
    expect(service.count('/widget/launch-ticket')).toBe(0); // no replacement
    expect(service.sockets[0]!.sent[0]!.payload).toMatchObject({ kind: 'focus' });
    expect(q('c2c-message').textContent).toContain('open elsewhere');
    // Asked again at once: the agent does not see that window, so one opens here after all.
    await vi.advanceTimersByTimeAsync(2000);
    expect(widget.enableCalls()).toBe(true);
    await flush();
    expect(service.count('/widget/launch-ticket')).toBe(1);
    expect(opened.at(-1)!.win.location.replace).toHaveBeenCalledWith('https://c2c.example/click2call/window#ticket=c2cl_t&lang=en');
  });

  it('falls back to the focus command for a live window it cannot name', async () => {
    start();
    await flush();
    service.sockets[0]!.accept(service.state());
    expect(widget.enableCalls()).toBe(true);
    expect(opened).toHaveLength(0);
    await flush();
    expect(service.sockets[0]!.sent[0]!.payload).toMatchObject({ kind: 'focus' });
    expect(q('c2c-message').textContent).toContain('open elsewhere');
    // A double-click is one gesture: nothing opens, the live window keeps its engine.
    await vi.advanceTimersByTimeAsync(200);
    expect(widget.enableCalls()).toBe(true);
    expect(opened).toHaveLength(0);
    expect(service.sockets[0]!.sent).toHaveLength(1);
    // Asked again after reading the message: the agent does not see that window, so one opens here.
    await vi.advanceTimersByTimeAsync(2000);
    expect(widget.enableCalls()).toBe(true);
    expect(opened).toHaveLength(1);
  });
});

describe('window messages (the spec\'s window message nudge)', () => {
  /** the call window, as this page opened it, posts a message to the widget's page */
  const fromWindow = (source: unknown, data: unknown) => window.dispatchEvent(new MessageEvent('message', { data, source: source as Window }));
  /** Enable calls from a widget with no window yet: the window it opened. */
  async function openedWindow() {
    service.set({ engine: null });
    start();
    await flush();
    widget.enableCalls();
    await flush();
    return opened[0]!.win;
  }

  it('nudges the window it opened when a command is queued for it while polling, and not while pushing', async () => {
    const win = await openedWindow();
    service.set({ engine: engine(), call: call('connected', { answered_at: T0 - 5 }) });
    service.realtimeAvailable = false;
    service.sockets[0]!.drop();
    await vi.advanceTimersByTimeAsync(3000);
    await widget.setMuted(true);
    expect(win.postMessage).toHaveBeenCalledWith({ c2c: 'nudge' }, '*');
    // a command the service carried out itself needs no window
    win.postMessage.mockClear();
    service.script.set('/widget/commands', [{ status: 200, body: { ok: true, status: 'done', command_id: 8 } }]);
    await widget.setAvailability(false);
    expect(win.postMessage).not.toHaveBeenCalled();
    // with the socket back, pushes carry commands to the window: no message
    const socket = service.sockets.at(-1)!;
    await vi.advanceTimersByTimeAsync(30_000);
    socket.accept(service.state());
    const unmuted = widget.setMuted(false);
    await flush();
    socket.sent.at(-1)!.ack(null, { ok: true, status: 'queued', command_id: 9 });
    await unmuted;
    expect(win.postMessage).not.toHaveBeenCalled();
  });

  it('polls at once when its call window says the state moved, at most once a second (a message too soon is kept for the end of it), and only for its own window', async () => {
    const win = await openedWindow();
    service.sockets[0]!.drop();
    await vi.advanceTimersByTimeAsync(100);
    const polls = () => service.count('/widget/state');
    let before = polls();
    fromWindow(win, { c2c: 'changed' });
    await flush();
    expect(polls()).toBe(before + 1);
    before = polls();
    for (let i = 0; i < 20; i += 1) fromWindow(win, { c2c: 'changed' });
    await flush();
    expect(polls()).toBe(before);
    // the state may have moved again since that poll: one more at the end of the second, not twenty
    await vi.advanceTimersByTimeAsync(1010);
    expect(polls()).toBe(before + 1);
    await vi.advanceTimersByTimeAsync(1000);
    before = polls();
    fromWindow({}, { c2c: 'changed' }); // another page's window
    await flush();
    expect(polls()).toBe(before);
    fromWindow(win, { c2c: 'changed' });
    await flush();
    expect(polls()).toBe(before + 1);
  });

  it('reads nothing with a refused token while the session endpoint is asked again, whatever its call window says', async () => {
    const win = await openedWindow();
    service.sockets[0]!.drop();
    await vi.advanceTimersByTimeAsync(100);
    const reads = () => service.requests.filter((r) => r.path === '/widget/state');
    // the token is revoked, and the session endpoint does not answer for a while
    service.script.set('/widget/state', [{ status: 401, body: { ok: false, error: 'unauthorized', message: 'The credential is missing, unknown, expired or revoked.' } }]);
    service.script.set('/crm/session', Array(4).fill('network'));
    fromWindow(win, { c2c: 'changed' });
    await flush();
    const refused = reads().length;
    expect(reads().at(-1)!.headers.authorization).toBe('Bearer c2cw_1');
    for (let second = 1; second <= 5; second += 1) {
      await vi.advanceTimersByTimeAsync(1000);
      fromWindow(win, { c2c: 'changed' });
      await flush();
      if (service.count('/crm/session') === 6) break; // the first session, and the four failures, then the one that answers
    }
    expect(reads().slice(refused).map((r) => r.headers.authorization)).not.toContain('Bearer c2cw_1');
    // once the endpoint answers, the state is read with its token at once
    await vi.advanceTimersByTimeAsync(60_000);
    expect(service.count('/crm/session')).toBe(6);
    expect(reads().length).toBeGreaterThan(refused);
    expect(reads()[refused]!.headers.authorization).toBe('Bearer c2cw_2');
  });

  it("does not cut short the service's Retry-After for a message from its call window", async () => {
    const win = await openedWindow();
    service.sockets[0]!.drop();
    await vi.advanceTimersByTimeAsync(100);
    const polls = () => service.count('/widget/state');
    service.script.set('/widget/state', [{ status: 429, headers: { 'retry-after': '10' }, body: { ok: false, error: 'rate_limited', message: 'Too many requests.' } }]);
    fromWindow(win, { c2c: 'changed' });
    await flush();
    const refused = polls();
    for (let second = 1; second < 10; second += 1) {
      await vi.advanceTimersByTimeAsync(1000);
      fromWindow(win, { c2c: 'changed' });
      await flush();
    }
    expect(polls()).toBe(refused);
    await vi.advanceTimersByTimeAsync(1000);
    expect(polls()).toBe(refused + 1);
  });

  it('leaves nothing running when detached with its socket in doubt and a message-asked poll pending, but the command in flight', async () => {
    const win = await openedWindow();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    await vi.advanceTimersByTimeAsync(2000);
    socket.ping();
    void widget.setMuted(true).catch(() => {});
    await vi.advanceTimersByTimeAsync(ACK_TIMEOUT_MS + 100); // unanswered: in doubt, polling
    fromWindow(win, { c2c: 'changed' });
    fromWindow(win, { c2c: 'changed' }); // the second waits for the end of the second
    widget.detach();
    const requests = service.requests.length;
    const connects = socket.connects;
    await vi.advanceTimersByTimeAsync(3_600_000);
    fromWindow(win, { c2c: 'changed' });
    await vi.advanceTimersByTimeAsync(10_000);
    // the agent's click still reaches the service (its REST retry, the same request_id); nothing else does
    expect(service.requests.slice(requests).map((r) => [r.path, r.body?.request_id])).toEqual([['/widget/commands', socket.sent[0]!.payload.request_id]]);
    expect(socket.connects).toBe(connects);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('the widget', () => {
  it('lives in an open Shadow DOM with buttons, live regions and stable test ids', async () => {
    service.set({ call: call('incoming', { direction: 'inbound' }) });
    start();
    await flush();
    const host = document.querySelector('[data-testid="c2c-host"]') as HTMLElement;
    expect(host.shadowRoot).toBeTruthy();
    expect(host.style.position).toBe('fixed');
    for (const id of ['c2c-state', 'c2c-enable', 'c2c-answer', 'c2c-decline', 'c2c-hangup', 'c2c-mute', 'c2c-dtmf', 'c2c-available', 'c2c-timer', 'c2c-message', 'c2c-open-tab']) {
      expect(q(id), id).toBeTruthy();
    }
    for (const id of ['c2c-enable', 'c2c-answer', 'c2c-decline', 'c2c-hangup', 'c2c-mute', 'c2c-dtmf', 'c2c-available']) {
      expect(q(id).tagName, id).toBe('BUTTON');
      expect(q(id).getAttribute('type')).toBe('button');
    }
    expect(visible('c2c-answer') && visible('c2c-decline')).toBe(true);
    expect(visible('c2c-hangup')).toBe(false);
    expect(q('c2c-alert').textContent).toBe('Incoming call: Jo Bloggs');
    expect(q('c2c-live').getAttribute('aria-live')).toBe('polite');
    expect(q('c2c-call-number').textContent).toBe('+44••••••0123'); // as the server masked it
    expect(document.querySelector('style')).toBeNull(); // nothing leaks into the page
  });

  it('announces every incoming call, the same hidden caller twice included, and reads messages out as they appear', async () => {
    const hidden = (id: string) => call('incoming', { direction: 'inbound', call_id: id, request_id: id, display: { name: null, company: null, number: null, contact_reference: null, department: null } });
    service.set({ call: hidden('ci_a') });
    const socket = await ready();
    const spoken: string[] = [];
    const observer = new MutationObserver(() => spoken.push(q('c2c-alert').textContent ?? ''));
    observer.observe(q('c2c-alert'), { childList: true, characterData: true, subtree: true });
    service.set({ call: { ...hidden('ci_a'), status: 'no_answer', ended_at: T0 + 30 } });
    service.push(socket);
    service.set({ call: hidden('ci_b') });
    service.push(socket);
    await flush();
    observer.disconnect();
    expect(spoken).toEqual(['Incoming call']);
  });

  it('reads messages out from a status region that is there before the message comes (one entering filled is skipped)', async () => {
    service.set({ call: call('connected', { answered_at: T0 }) });
    await ready();
    const said = q('c2c-said');
    expect(said.getAttribute('role')).toBe('status');
    expect(said.hidden).toBe(false);
    expect(said.textContent).toBe('');
    expect(q('c2c-message').hidden).toBe(true);
    service.script.set('/widget/commands', Array(COMMAND_ATTEMPTS).fill({ status: 502, body: { ok: false, error: 'hangup_uncertain', message: 'The provider did not confirm.' } }));
    service.sockets[0]!.drop();
    await flush();
    void widget.hangup().catch(() => {});
    await vi.advanceTimersByTimeAsync(0);
    // the same node, written in place: what the screen reader watches is what changed
    expect(q('c2c-said')).toBe(said);
    expect(said.textContent).toContain('may still be up');
    expect(q('c2c-message').textContent).toBe(said.textContent);

    // Tried again and refused alike: the same words, spoken again (a new text node), once.
    const writes: string[] = [];
    const observer = new MutationObserver((records) => {
      for (const record of records) for (const node of record.addedNodes) writes.push(node.textContent ?? '');
    });
    observer.observe(said, { childList: true });
    void widget.hangup().catch(() => {});
    await vi.advanceTimersByTimeAsync(0);
    await flush();
    observer.disconnect();
    expect(writes).toEqual([said.textContent]);
  });

  it('speaks what the state and the call say on screen: a call the window lost, a hang up under way', async () => {
    service.set({ call: call('connected', { answered_at: T0 }) });
    const socket = await ready();
    expect(q('c2c-live').textContent).toBe(`${q('c2c-state').textContent}. ${q('c2c-call-status').textContent}`);
    // the window crashed: the customer may still be on the line
    service.set({ call: call('connected', { answered_at: T0, orphaned: true }) });
    service.push(socket);
    await flush();
    expect(q('c2c-call-status').textContent).toBe('The call window lost this call. Hang up to end it.');
    expect(q('c2c-live').textContent).toBe(`${q('c2c-state').textContent}. ${q('c2c-call-status').textContent}`);
    // Hang up pressed: the button goes, and why is said
    service.script.set('/widget/commands', ['hang']);
    service.sockets[0]!.drop();
    await flush();
    void widget.hangup().catch(() => {});
    await vi.advanceTimersByTimeAsync(0);
    expect(q('c2c-call-status').textContent).toBe('Ending the call…');
    expect(q('c2c-live').textContent).toBe(`${q('c2c-state').textContent}. Ending the call…`);
  });

  it('speaks "call window not ready", as it shows, when the microphone is granted but the voice line is not up yet', async () => {
    service.set({ engine: engine({ state: 'enabling', mic_ready: false }) });
    const socket = await ready();
    expect(q('c2c-live').textContent).toBe('Microphone not ready');
    service.set({ engine: engine({ state: 'enabling', mic_ready: true }) });
    service.push(socket);
    await flush();
    expect(q('c2c-state').textContent).toBe('Call window not ready');
    expect(q('c2c-live').textContent).toBe('Call window not ready');
  });

  it('keeps the keyboard focus in the widget when the control that had it goes away', async () => {
    service.set({ call: call('incoming', { direction: 'inbound' }) });
    const socket = await ready();
    q('c2c-answer').focus();
    expect(root().activeElement).toBe(q('c2c-answer'));
    // answered: Answer and Decline go, Hang up comes
    service.set({ call: call('connected', { direction: 'inbound', answered_at: T0 }) });
    service.push(socket);
    await flush();
    expect(visible('c2c-answer')).toBe(false);
    // to the panel, not to Hang up in Answer's place: a held or repeated Enter must not hang up
    expect(visible('c2c-hangup')).toBe(true);
    expect(root().activeElement).toBe(q('c2c-widget'));
    q('c2c-hangup').focus();
    // ended: Hang up goes; the focus stays in the widget, not on Available (a second Enter would switch it off)
    service.set({ call: call('completed', { direction: 'inbound', answered_at: T0, ended_at: T0 + 5 }) });
    service.push(socket);
    await flush();
    expect(visible('c2c-hangup')).toBe(false);
    expect(visible('c2c-available')).toBe(true);
    expect(root().activeElement).toBe(q('c2c-widget'));
  });

  it('closes the keypad when the call changes: it does not open by itself on the next call', async () => {
    service.set({ call: call('connected', { answered_at: T0 }) });
    const socket = await ready();
    (q('c2c-dtmf') as HTMLButtonElement).click();
    await flush();
    expect(visible('c2c-keypad')).toBe(true);
    service.set({ call: call('completed', { answered_at: T0, ended_at: T0 + 5 }) });
    service.push(socket);
    service.set({ call: call('connected', { call_id: 'ci_2', request_id: 'ci_2', answered_at: T0 + 10 }) });
    service.push(socket);
    await flush();
    expect(visible('c2c-dtmf')).toBe(true);
    expect(visible('c2c-keypad')).toBe(false);
    expect(q('c2c-dtmf').getAttribute('aria-expanded')).toBe('false');
  });

  it('shows a window left not Available as ready once incoming calls are turned off: no state the agent cannot leave', async () => {
    service.engine = engine({ available: false });
    const socket = await ready();
    expect(q('c2c-state').dataset.state).toBe('unavailable');
    expect(visible('c2c-available')).toBe(true);
    service.set({ policy: policy(['mute', 'dtmf'], { inbound: false }) });
    service.push(socket);
    await flush();
    expect(q('c2c-state').dataset.state).toBe('ready');
    expect(visible('c2c-available')).toBe(false);
  });

  it('takes the Available toggle away once the session is over, as every other control', async () => {
    const socket = await ready();
    expect(visible('c2c-available')).toBe(true);
    socket.fire('ended', { code: 'platform_disabled', final: true, message: 'The service is disabled platform-wide.' });
    await flush();
    expect(q('c2c-state').dataset.state).toBe('error');
    expect(visible('c2c-available')).toBe(false);
  });

  it('answers and declines incoming calls from its buttons', async () => {
    service.set({ call: call('incoming', { direction: 'inbound' }) });
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    (q('c2c-answer') as HTMLButtonElement).click();
    await flush();
    expect(socket.sent[0]!.payload).toMatchObject({ kind: 'answer', ref: 'ci_1' });
    expect(q('c2c-call-status').textContent).toBe('Answering…');
    expect(visible('c2c-answer')).toBe(false);
    // Hang up does not take Answer's place while the call still rings in: a double-click's second
    // click would drop the caller
    expect(visible('c2c-hangup')).toBe(false);
    service.set({ call: call('connected', { direction: 'inbound' }) });
    service.push(socket);
    await flush();
    expect(visible('c2c-hangup')).toBe(true);
  });

  /** A call ringing on a connected widget, and the commandfailed events it emits from now on. */
  async function ringingWithFailures() {
    service.set({ call: call('incoming', { direction: 'inbound' }) });
    const socket = await ready();
    const failures: unknown[] = [];
    widget.on('commandfailed', (f) => failures.push(f));
    return { socket, failures };
  }
  /** The next state names a failed answer (WidgetState.failed_command). */
  const windowFailed = (requestId: string, message: string) =>
    service.set({ failedCommand: { request_id: requestId, kind: 'answer', error: 'command_failed', message, failed_at: T0 } });

  it('reports an answer the call window could not carry out as soon as a snapshot says so, and offers Answer again', async () => {
    const { socket, failures } = await ringingWithFailures();
    (q('c2c-answer') as HTMLButtonElement).click();
    await flush();
    const sent = socket.sent[0]!;
    sent.ack(null, { ok: true, status: 'queued', command_id: 9 });
    await flush();
    expect(q('c2c-call-status').textContent).toBe('Answering…');
    // another widget's failure is not this one's
    windowFailed('someone-else', 'not ours');
    service.push();
    expect(failures).toEqual([]);
    windowFailed(sent.payload.request_id, 'The voice device is not ready.');
    service.push();
    expect(failures).toEqual([{ kind: 'answer', error: 'command_failed', message: 'The voice device is not ready.' }]);
    expect(visible('c2c-answer')).toBe(true);
    expect(q('c2c-message').textContent).toBe('The call window could not do this: The voice device is not ready.');
    // later states that still carry it (a reconnect's snapshot, another change) report nothing more
    service.push();
    service.set({});
    service.push();
    expect(failures).toHaveLength(1);
  });

  it.each([
    ['a refusal, which it rejects with', { ok: false, error: 'invalid_state', message: 'The call is not ringing.' }, 'invalid_state'],
    ["an ok, and it rejects with the window's failure", { ok: true, status: 'queued', command_id: 9 }, 'command_failed'],
  ])("reports a command once when the window's failure arrives before the command's own answer: %s %s", async (_, reply, code) => {
    const { socket, failures } = await ringingWithFailures();
    const answered = widget.answer().catch((e) => e);
    await flush();
    const sent = socket.sent[0]!;
    windowFailed(sent.payload.request_id, 'No microphone.');
    service.push();
    expect(failures).toHaveLength(1);
    sent.ack(null, reply);
    expect(await answered).toMatchObject({ code });
    expect(failures).toEqual([{ kind: 'answer', error: 'command_failed', message: 'No microphone.' }]);
    expect(visible('c2c-answer')).toBe(true);
  });

  it('offers Hang up, not Answer or Decline, for an incoming call the window lost', async () => {
    service.set({ call: call('incoming', { direction: 'inbound', orphaned: true }), engine: engine({ state: 'closed', live: false }) });
    start();
    await flush();
    expect(q('c2c-call-status').textContent).toContain('lost this call');
    expect(visible('c2c-answer')).toBe(false);
    expect(visible('c2c-decline')).toBe(false);
    expect(visible('c2c-hangup')).toBe(true);
  });

  it('hides what the policy does not allow and shows the keypad only for dtmf', async () => {
    service.set({ policy: policy(['dtmf'], { inbound: false }), call: call('connected', { answered_at: T0 }) });
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    expect(visible('c2c-mute')).toBe(false);
    expect(visible('c2c-available')).toBe(false);
    expect(visible('c2c-dtmf')).toBe(true);
    expect(visible('c2c-keypad')).toBe(false);
    (q('c2c-dtmf') as HTMLButtonElement).click();
    expect(visible('c2c-keypad')).toBe(true);
    expect(q('c2c-dtmf').getAttribute('aria-expanded')).toBe('true');
    (q('c2c-digit-hash') as HTMLButtonElement).click();
    await flush();
    expect(socket.sent[0]!.payload).toMatchObject({ kind: 'dtmf', digits: '#' });
  });

  it('speaks French', async () => {
    start({ language: 'fr' });
    await flush();
    expect(q('c2c-state').textContent).toBe('Prêt pour les appels');
    expect(q('c2c-available').textContent).toBe('Disponible');
    expect(q('c2c-widget').getAttribute('lang')).toBe('fr');
  });

  it('tells the call window it opens the language it speaks (beside the ticket, in the fragment)', async () => {
    service.set({ engine: null });
    start({ language: 'fr' });
    await flush();
    widget.enableCalls();
    await flush();
    expect(opened[0]!.win.location.replace).toHaveBeenCalledWith('https://c2c.example/click2call/window#ticket=c2cl_t&lang=fr');
  });

  it("shows the service's refusals in the widget's language, and one it does not know as a plain failure, its detail for the developer", async () => {
    const warnings: string[] = [];
    start({ language: 'fr' }, { warn: (message) => warnings.push(message) });
    await flush();
    service.script.set('/crm/call', [{ status: 409, body: { ok: false, error: 'agent_offline', message: 'The agent has no live call window.' } }]);
    // the promise keeps the service's own answer
    expect(await widget.requestCall({})).toMatchObject({ error: 'agent_offline', message: 'The agent has no live call window.' });
    expect(q('c2c-message').textContent).toBe('Ouvrez d’abord la fenêtre d’appel (Activer les appels).');
    service.script.set('/crm/call', [{ status: 400, body: { ok: false, error: 'crm_quota', message: 'Our CRM says no.' } }]);
    await widget.requestCall({});
    expect(q('c2c-message').textContent).toBe('Une erreur s’est produite ; réessayez.');
    expect(warnings).toEqual([expect.stringContaining('crm_quota: Our CRM says no.')]);
  });

  it.each([
    ['the session answer', null],
    ['the state when the session answer left them out', { widget_token: 'c2cw_min', expires_at: T0 + 1800 }],
  ])('takes the integration defaults for language and position from %s, when init() does not choose', async (_, trimmed) => {
    service.policy = policy(['mute'], { widget: { position: 'top-left', language: 'fr', window_mode: 'popup' } });
    if (trimmed) service.script.set('/crm/session', [{ status: 201, body: trimmed }]);
    start();
    await flush();
    expect(q('c2c-state').textContent).toBe('Prêt pour les appels');
    const host = document.querySelector('[data-testid="c2c-host"]') as HTMLElement;
    expect(host.style.top).toBe('16px');
    expect(host.style.left).toBe('16px');
    expect(document.querySelectorAll('[data-testid="c2c-host"]')).toHaveLength(1);
  });

  it("speaks the page's language (<html lang>) when the integration chose none, and keeps the integration's choice over it", async () => {
    document.documentElement.lang = 'fr';
    service.offContract = true; // an older release's null language, below
    try {
      service.policy = policy(['mute'], { widget: { position: 'bottom-right', language: 'page', window_mode: 'popup' } });
      start();
      await flush();
      expect(q('c2c-state').textContent).toBe('Prêt pour les appels');
      widget.detach();
      // as a node of the release with migration 011 answers it
      service.policy = policy(['mute'], { widget: { position: 'bottom-right', language: null as unknown as string, window_mode: 'popup' } });
      start();
      await flush();
      expect(q('c2c-state').textContent).toBe('Prêt pour les appels');
      widget.detach();
      service.policy = policy(['mute'], { widget: { position: 'bottom-right', language: 'en', window_mode: 'popup' } });
      start();
      await flush();
      expect(q('c2c-state').textContent).toBe('Ready for calls');
    } finally {
      document.documentElement.lang = '';
    }
  });

  it('runs from <head>, before the page has a body: the session starts at once and the widget appears with the body', async () => {
    const body = document.body;
    body.remove();
    try {
      expect(document.body).toBeNull();
      start();
      await flush();
      expect(service.count('/crm/session')).toBe(1);
      document.documentElement.appendChild(body);
      expect(document.querySelector('[data-testid="c2c-host"]')).toBeNull();
      document.dispatchEvent(new Event('DOMContentLoaded'));
      expect(document.body.querySelectorAll('[data-testid="c2c-host"]')).toHaveLength(1);
      expect(q('c2c-state').textContent).toBe('Ready for calls');
    } finally {
      if (!body.isConnected) document.documentElement.appendChild(body);
    }
  });

  it("speaks the page's language in what it says before the body is there (a refused call asked from <head>)", async () => {
    const body = document.body;
    body.remove();
    document.documentElement.lang = 'fr';
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      start();
      await flush();
      service.script.set('/crm/call', [{ status: 409, body: { ok: false, error: 'agent_offline', message: 'The agent has no live call window.' } }]);
      const refused = new Promise((resolve) => widget.on('callrequested', resolve));
      await widget.requestCall({ contact_reference: 'x' });
      await refused;
      document.documentElement.appendChild(body);
      document.dispatchEvent(new Event('DOMContentLoaded'));
      expect(q('c2c-message').textContent).toBe('Ouvrez d’abord la fenêtre d’appel (Activer les appels).');
    } finally {
      warn.mockRestore();
      document.documentElement.lang = '';
      if (!body.isConnected) document.documentElement.appendChild(body);
    }
  });

  it("applies an operator's change of the widget defaults after the call, not during it (the agent's focus and keypad stay)", async () => {
    service.set({ call: call('connected', { answered_at: T0 - 5 }) });
    const socket = await ready();
    const host = document.querySelector('[data-testid="c2c-host"]');
    service.set({ policy: policy(['mute', 'dtmf'], { widget: { position: 'bottom-right', language: 'fr', window_mode: 'popup' } }) });
    service.push(socket);
    expect(document.querySelector('[data-testid="c2c-host"]')).toBe(host);
    expect(q('c2c-hangup').textContent).toBe('Hang up');
    service.set({ call: call('completed', { answered_at: T0 - 5, ended_at: T0, duration: 5 }) });
    service.push(socket);
    expect(document.querySelector('[data-testid="c2c-host"]')).not.toBe(host);
    expect(q('c2c-state').textContent).toBe('Prêt pour les appels');
  });

  it('mounts inline in a given container', async () => {
    const container = document.createElement('div');
    document.body.appendChild(container);
    start({ container });
    await flush();
    const host = container.querySelector('[data-testid="c2c-host"]') as HTMLElement;
    expect(host).toBeTruthy();
    expect(host.style.position).toBe('');
  });

  it('says how a call ended, for a moment', async () => {
    service.set({ call: call('connected', { answered_at: T0 }) });
    start();
    await flush();
    service.sockets[0]!.accept(service.state());
    service.set({ call: call('completed', { answered_at: T0, ended_at: T0 + 30, duration: 30 }) });
    service.push();
    expect(q('c2c-state').dataset.state).toBe('ready');
    expect(q('c2c-message').textContent).toBe('Call ended');
    await vi.advanceTimersByTimeAsync(11_000);
    expect(visible('c2c-message')).toBe(false);
  });
});

describe('detach, endSession and the global', () => {
  it('detach stops everything and removes the widget, without a hangup', async () => {
    service.set({ call: call('connected', { answered_at: T0 }) });
    start();
    await flush();
    const socket = service.sockets[0]!;
    socket.accept(service.state());
    let detached = 0;
    widget.on('detached', () => detached++);
    widget.detach();
    expect(detached).toBe(1);
    expect(document.querySelector('[data-testid="c2c-host"]')).toBeNull();
    expect(socket.connected).toBe(false);
    const requests = service.requests.length;
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(service.requests.length).toBe(requests);
    expect(service.requests.some((r) => r.body?.kind === 'hangup')).toBe(false);
  });

  it('refuses a command once detached, sending nothing, and reports it as commandfailed (detached)', async () => {
    service.set({ call: call('connected', { answered_at: T0 }) });
    await ready();
    const failures: Array<{ kind: string; error: string }> = [];
    widget.on('commandfailed', (f) => failures.push(f));
    widget.detach();
    const requests = service.requests.length;
    await expect(widget.hangup()).rejects.toMatchObject({ code: 'detached' });
    expect(failures).toEqual([expect.objectContaining({ kind: 'hangup', error: 'detached' })]);
    expect(service.requests.length).toBe(requests);
  });

  it('endSession revokes the widget token and stops', async () => {
    start();
    await flush();
    service.sockets[0]!.accept(service.state());
    expect(await widget.endSession()).toEqual({ ok: true, revoked: true });
    expect(service.requests.at(-1)).toMatchObject({ path: '/widget/revoke', headers: { authorization: 'Bearer c2cw_1' } });
    expect(widget.getState().state).toBe('unauthorized');
    expect(service.count('/crm/session')).toBe(1);
  });

  it('endSession while the session is still being asked for revokes the token that then arrives, and starts nothing with it', async () => {
    const release = startHolding('/crm/session');
    await flush();
    const ended = outcome(widget.endSession());
    await flush();
    expect(ended.settled).toBe(false);
    release();
    await flush();
    expect(ended).toEqual({ settled: true, value: { ok: true, revoked: true } });
    expect(service.requests.at(-1)).toMatchObject({ path: '/widget/revoke', headers: { authorization: 'Bearer c2cw_1' } });
    expect(widget.getState().state).toBe('unauthorized');
    expect(service.sockets).toHaveLength(0);
    expect(service.count('/widget/state')).toBe(0);
  });

  it('leaves no timer running after endSession, even with a connected call in the last state', async () => {
    service.set({ call: call('connected', { answered_at: T0 }) });
    await ready();
    await flush();
    await widget.endSession();
    await vi.advanceTimersByTimeAsync(5000);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('leaves no timer running after endSession while the session endpoint is being retried', async () => {
    service.script.set('/crm/session', ['network']);
    start();
    await flush();
    expect(service.count('/crm/session')).toBe(1);
    expect(await widget.endSession()).toEqual({ ok: true });
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(service.count('/crm/session')).toBe(1);
  });

  it('refuses requestCall once detached, sending nothing', async () => {
    await ready();
    widget.detach();
    const before = service.requests.length;
    await expect(widget.requestCall({ contact_reference: 'x' })).rejects.toMatchObject({ code: 'detached' });
    expect(service.requests.length).toBe(before);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('lets a requestCall answered after detach() or endSession() start nothing: no timer, no "did not start" later', async () => {
    for (const end of ['detach', 'endSession'] as const) {
      const answerCall = startHolding('/crm/call');
      await flush();
      service.sockets.at(-1)!.accept(service.state());
      const requested: unknown[] = [];
      widget.on('callrequested', (body) => requested.push(body));
      const pending = widget.requestCall({ contact_reference: 'crm-42' });
      await flush();
      if (end === 'detach') widget.detach();
      else await widget.endSession();
      answerCall();
      expect(await pending, end).toMatchObject({ ok: true });
      expect(requested, end).toHaveLength(1); // still told to a page that listens
      expect(vi.getTimerCount(), end).toBe(0);
      widget.detach();
    }
  });

  it('counts the session over from endSession() on, before its revoke is answered: a call answered meanwhile starts no watch, a click opens no window', async () => {
    const answerRevoke = startHolding('/widget/revoke');
    await flush();
    service.sockets.at(-1)!.accept(service.state());
    const ending = widget.endSession();
    await flush();
    expect(await widget.requestCall({ contact_reference: 'crm-42' })).toMatchObject({ ok: true });
    expect(widget.enableCalls()).toBe(false);
    expect(opened).toEqual([]);
    answerRevoke(); // (its request's time limit is the one timer until then)
    expect(await ending).toEqual({ ok: true, revoked: true });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('opens no call window once the session is over (logged out): the widget keeps saying why', async () => {
    await ready();
    await widget.endSession();
    const said = q('c2c-state').textContent;
    expect(widget.enableCalls()).toBe(false);
    expect(opened).toEqual([]);
    expect(q('c2c-state').textContent).toBe(said);
  });

  it('refuses arguments of the wrong type without a request: a string for setMuted or setAvailability, a number of digits, params JSON cannot carry', async () => {
    service.set({ policy: { ...service.state().policy, controls: ['mute', 'dtmf'] } });
    await ready();
    const before = service.requests.length;
    await expect(widget.setMuted('false' as never)).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(widget.setAvailability('yes' as never)).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(widget.sendDigits(123 as never)).rejects.toMatchObject({ code: 'invalid_request' });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const params of [{ metadata: { n: 1n } }, cyclic, 'crm-42', [1]]) {
      await expect(widget.requestCall(params as never)).rejects.toMatchObject({ code: 'invalid_request' });
    }
    expect(service.requests.length).toBe(before);
    expect(widget.getState().engine?.muted ?? false).toBe(false);
  });

  it('has the frame-shell entry points of the spec, which say clearly that this version has no shell', async () => {
    expect(SDK.inShell).toBe(false);
    expect(() => SDK.enterShell('/shell')).toThrow(expect.objectContaining({ code: 'not_supported' }));
    // the option is taken (there is nothing to redirect into)
    start({ shellRedirect: false });
    await flush();
    expect(widget.getState().state).not.toBe('error');
    expect(opened).toEqual([]); // nothing opened or redirected
  });

  it('replaces the widget of a container init() is called for again (a single-page app mounting anew), and keeps one in another container', async () => {
    const deps = { fetch: service.fetch, io: (url: string, opts: Record<string, any>) => { const s = new FakeSocket(url, opts); service.sockets.push(s); return s; }, origin: ORIGIN, open: () => null, storage: null };
    const options = { integrationId: 'c2c_demo', sessionEndpoint: '/crm/session', apiBaseUrl: API };
    const panel = document.createElement('div');
    document.body.append(panel);
    const first = SDK.init(options, deps);
    const inPanel = SDK.init({ ...options, container: panel }, deps);
    await flush();
    let firstDetached = 0;
    first.on('detached', () => firstDetached++);
    const second = SDK.init(options, deps);
    widget = second;
    await flush();
    expect(firstDetached).toBe(1);
    // one widget fixed in the page's corner (the second, the first gone with it), one in the panel
    expect(document.querySelectorAll('[data-testid=c2c-host]').length).toBe(2);
    expect(panel.querySelectorAll('[data-testid=c2c-host]').length).toBe(1);
    await expect(first.setMuted(true)).rejects.toMatchObject({ code: 'detached' });
    expect(inPanel.getState().state).toBe('ready');
    expect(second.getState().state).toBe('ready');
    inPanel.detach();
    panel.remove();
  });

  it('takes document.body given as the container as the page itself: fixed in its corner, and one widget with the one init() gave no container', async () => {
    const deps = { fetch: service.fetch, io: (url: string, opts: Record<string, any>) => { const s = new FakeSocket(url, opts); service.sockets.push(s); return s; }, origin: ORIGIN, open: () => null, storage: null };
    const options = { integrationId: 'c2c_demo', sessionEndpoint: '/crm/session', apiBaseUrl: API };
    const first = SDK.init(options, deps);
    await flush();
    let firstDetached = 0;
    first.on('detached', () => firstDetached++);
    const second = SDK.init({ ...options, container: document.body }, deps);
    widget = second;
    await flush();
    expect(firstDetached).toBe(1);
    const hosts = document.querySelectorAll<HTMLElement>('[data-testid=c2c-host]');
    expect(hosts.length).toBe(1);
    expect(hosts[0]!.style.position).toBe('fixed');
  });

  it('refuses options it cannot start with (none, not an object, a container that is no element) and leaves the widget there as it was', async () => {
    const deps = { fetch: service.fetch, io: (url: string, opts: Record<string, any>) => { const s = new FakeSocket(url, opts); service.sockets.push(s); return s; }, origin: ORIGIN, open: () => null, storage: null };
    const working = SDK.init({ integrationId: 'c2c_demo', sessionEndpoint: '/crm/session', apiBaseUrl: API }, deps);
    widget = working;
    await flush();
    for (const bad of [undefined, null, 'c2c_demo', [], { integrationId: 'c2c_demo', sessionEndpoint: '/crm/session', container: '#panel' }]) {
      expect(() => SDK.init(bad as never, deps), JSON.stringify(bad)).toThrow(expect.objectContaining({ code: 'invalid_options' }));
    }
    expect(working.getState().state).toBe('ready');
    expect(document.querySelectorAll('[data-testid=c2c-host]').length).toBe(1);
    await expect(SDK.setMuted(true)).resolves.toMatchObject({ ok: true }); // the global still acts on it
  });

  it('makes the global methods act on the last initialised widget', async () => {
    const w = SDK.init(
      { integrationId: 'c2c_demo', sessionEndpoint: '/crm/session', apiBaseUrl: API },
      { fetch: service.fetch, io: (url, opts) => { const s = new FakeSocket(url, opts); service.sockets.push(s); return s; }, origin: ORIGIN, open: () => null, storage: null },
    );
    widget = w;
    await flush();
    expect(SDK.getState().state).toBe('ready');
    const seen: string[] = [];
    SDK.on('commandfailed', (f) => seen.push(f.error));
    await expect(SDK.setMuted(true)).resolves.toMatchObject({ ok: true });
    await expect(SDK.sendDigits('x')).rejects.toMatchObject({ code: 'invalid_request' });
    expect(seen).toEqual(['invalid_request']);
    expect(typeof SDK.enableCalls).toBe('function');
    expect(SDK.WIDGET_STATES).toContain('no_mic');
  });
});
