/** The widget session: the refresh schedule, refresh failures, and asking sessionEndpoint again once. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SdkError, type HttpAnswer } from '../../sdk/src/http.js';
import type { SessionStatus } from '../../sdk/src/machine.js';
import { SessionKeeper, refusalState } from '../../sdk/src/session.js';
import { fullJitter, refreshDelayMs, systemClock } from '../../sdk/src/timing.js';

const flushPromises = () => vi.advanceTimersByTimeAsync(0);
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
const session = (token: string, expiresAt: number) => ({
  ok: true,
  widget_token: token,
  expires_at: expiresAt,
  agent: { name: 'Ana', identifier: 'ana@acme.example', type: 'email', department: null },
  policy: { outbound: true, inbound: true, number_visibility: 'show', controls: [], widget: { position: 'bottom-right', language: 'en', window_mode: 'popup' }, max_call_seconds: 60 },
  engine: null,
  realtime: { url: 'http://gw', path: '/socket.io', available: true },
});

describe('refreshDelayMs', () => {
  it('refreshes 60 s before expiry, or at 80 % of the remaining time when that is sooner', () => {
    expect(refreshDelayMs(1800, 0)).toBe(1740_000); // 30 minutes
    expect(refreshDelayMs(300, 0)).toBe(240_000); // 5 minutes: both rules agree
    expect(refreshDelayMs(100, 0)).toBe(80_000);
    expect(refreshDelayMs(10, 0)).toBe(8_000);
    expect(refreshDelayMs(1000, 999_500)).toBe(400);
    expect(refreshDelayMs(1000, 1_000_000)).toBe(0);
    expect(refreshDelayMs(1000, 2_000_000)).toBe(0);
  });

  it('is measured on the server clock', () => {
    expect(refreshDelayMs(1_000_000 + 1800, 1_000_000_000)).toBe(1740_000);
  });
});

describe('fullJitter', () => {
  it('stays in [0, min(cap, base·2^attempt))', () => {
    expect(fullJitter(0, 500, 30_000, () => 0)).toBe(0);
    expect(fullJitter(0, 500, 30_000, () => 0.999)).toBe(499);
    expect(fullJitter(3, 500, 30_000, () => 0.5)).toBe(2000);
    expect(fullJitter(20, 500, 30_000, () => 0.999)).toBe(29_970);
    for (let i = 0; i < 100; i++) expect(fullJitter(i % 10)).toBeLessThan(30_000);
  });
});

describe('SessionKeeper', () => {
  let statuses: SessionStatus[];
  let tokens: number;
  let serverNow: number;
  let fetchFn: ReturnType<typeof vi.fn>;
  let refreshCall: ReturnType<typeof vi.fn>;

  const keeper = () =>
    new SessionKeeper({
      fetch: fetchFn as never,
      clock: systemClock,
      integrationId: 'c2c_demo',
      sessionEndpoint: '/crm/click2call/session',
      headers: { 'x-csrf-token': 'abc' },
      origin: 'https://crm.example.com',
      refreshCall: refreshCall as never,
      serverNowMs: () => serverNow,
      onStatus: (s) => statuses.push(s),
      onToken: () => void tokens++,
    });

  beforeEach(() => {
    vi.useFakeTimers();
    statuses = [];
    tokens = 0;
    serverNow = 1_000_000_000;
    fetchFn = vi.fn();
    refreshCall = vi.fn();
  });
  afterEach(() => vi.useRealTimers());

  it('posts the integration and the page origin with same-origin credentials and the extra headers', async () => {
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_001_800)));
    const k = keeper();
    expect(await k.start()).toBe(true);
    const [url, init] = fetchFn.mock.calls[0]!;
    expect(url).toBe('/crm/click2call/session');
    expect(init).toMatchObject({ method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json', 'x-csrf-token': 'abc' } });
    expect(JSON.parse(init.body)).toEqual({ integration_id: 'c2c_demo', origin: 'https://crm.example.com' });
    expect(k.token).toBe('c2cw_a');
    expect(statuses).toEqual(['loading', 'active']);
    k.stop();
  });

  it('refreshes 60 s before a 30-minute token expires, and again from the new expiry', async () => {
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_001_800)));
    refreshCall.mockImplementation(async (): Promise<HttpAnswer> => {
      const expires = Math.floor(serverNow / 1000) + 1800;
      return { status: 200, etag: null, body: { ok: true, widget_token: `c2cw_${expires}`, expires_at: expires } };
    });
    const k = keeper();
    await k.start();
    await vi.advanceTimersByTimeAsync(1739_000);
    expect(refreshCall).not.toHaveBeenCalled();
    serverNow += 1740_000;
    await vi.advanceTimersByTimeAsync(1000);
    expect(refreshCall).toHaveBeenCalledTimes(1);
    expect(k.token).toBe('c2cw_1003540');
    expect(tokens).toBe(2); // the session, then the refresh: each reconnects the socket
    serverNow += 1740_000;
    await vi.advanceTimersByTimeAsync(1740_000);
    expect(refreshCall).toHaveBeenCalledTimes(2);
    k.stop();
  });

  it('refreshes a short-lived token at 80 % of its remaining time', async () => {
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_000_100)));
    refreshCall.mockResolvedValue({ status: 200, etag: null, body: { ok: true, widget_token: 'c2cw_b', expires_at: 1_000_200 } });
    const k = keeper();
    await k.start();
    await vi.advanceTimersByTimeAsync(79_999);
    expect(refreshCall).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(refreshCall).toHaveBeenCalledTimes(1);
    k.stop();
  });

  it('retries a refresh that got no answer, and asks the session again when the token is refused', async () => {
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_000_100))).mockResolvedValueOnce(json(201, session('c2cw_new', 1_001_800)));
    refreshCall.mockRejectedValueOnce(new SdkError('unreachable', 'offline', 0)).mockRejectedValueOnce(new SdkError('unauthorized', 'revoked', 401));
    const k = keeper();
    await k.start();
    await vi.advanceTimersByTimeAsync(80_000);
    expect(refreshCall).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(25_000);
    expect(refreshCall).toHaveBeenCalledTimes(2);
    expect(fetchFn).toHaveBeenCalledTimes(2);
    expect(k.token).toBe('c2cw_new');
    expect(statuses).toEqual(['loading', 'active', 'renewing', 'active']);
    k.stop();
  });

  it('keeps a failed refresh\'s retry when snapshots reschedule meanwhile: it is not pushed back towards expiry', async () => {
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_001_800)));
    refreshCall.mockRejectedValueOnce(new SdkError('unreachable', 'offline', 0)).mockResolvedValue({ status: 200, etag: null, body: { ok: true, widget_token: 'c2cw_b', expires_at: 1_003_600 } });
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const k = keeper();
    await k.start();
    serverNow += 1740_000;
    await vi.advanceTimersByTimeAsync(1740_000);
    expect(refreshCall).toHaveBeenCalledTimes(1); // failed: tried again 1.5 s later (1 s + half of the 1 s jitter)
    // snapshots arrive every second meanwhile, each rescheduling from the expiry (48 s away)
    for (let i = 0; i < 3; i++) {
      serverNow += 500;
      k.schedule();
      await vi.advanceTimersByTimeAsync(500);
    }
    expect(refreshCall).toHaveBeenCalledTimes(2);
    expect(k.token).toBe('c2cw_b');
    // and the next refresh is scheduled from the new expiry again (1858.5 s away: at 1798.5 s)
    k.schedule();
    await vi.advanceTimersByTimeAsync(1798_000);
    expect(refreshCall).toHaveBeenCalledTimes(2);
    serverNow += 1798_500;
    await vi.advanceTimersByTimeAsync(500);
    expect(refreshCall).toHaveBeenCalledTimes(3);
    k.stop();
    vi.restoreAllMocks();
  });

  it('a refresh answered after a new session came keeps the new session\'s token, and refreshes it in time', async () => {
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_000_100))).mockResolvedValueOnce(json(201, session('c2cw_new', 1_001_800)));
    let answerRefresh!: (a: HttpAnswer) => void;
    refreshCall.mockImplementationOnce(() => new Promise<HttpAnswer>((resolve) => (answerRefresh = resolve)));
    const k = keeper();
    await k.start();
    await vi.advanceTimersByTimeAsync(80_000);
    expect(refreshCall).toHaveBeenCalledTimes(1);
    // meanwhile a poll's rejection asks the session endpoint again
    expect(await k.rejected(new SdkError('unauthorized', 'refused', 401))).toBe(true);
    expect(k.token).toBe('c2cw_new');
    answerRefresh({ status: 200, etag: null, body: { ok: true, widget_token: 'c2cw_old_refreshed', expires_at: 1_000_300 } });
    await flushPromises();
    expect(k.token).toBe('c2cw_new');
    expect(k.expiresAt).toBe(1_001_800);
    refreshCall.mockResolvedValue({ status: 200, etag: null, body: { ok: true, widget_token: 'c2cw_next', expires_at: 1_003_600 } });
    // the new token (expiring 1800 s after the server time it came at) is refreshed 60 s before it expires
    await vi.advanceTimersByTimeAsync(1739_000);
    expect(refreshCall).toHaveBeenCalledTimes(1);
    serverNow += 1740_000;
    await vi.advanceTimersByTimeAsync(1000);
    expect(refreshCall).toHaveBeenCalledTimes(2);
    expect(k.token).toBe('c2cw_next');
    k.stop();
  });

  it('asks sessionEndpoint once per rejection; a second rejection before any success is final', async () => {
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_001_800))).mockResolvedValueOnce(json(201, session('c2cw_b', 1_001_800)));
    const k = keeper();
    await k.start();
    // Two requests fail together: they share one new session.
    const [a, b] = await Promise.all([k.rejected(new SdkError('unauthorized', 'x', 401)), k.rejected(new SdkError('unauthorized', 'x', 401))]);
    expect([a, b]).toEqual([true, true]);
    expect(fetchFn).toHaveBeenCalledTimes(2);
    expect(await k.rejected(new SdkError('unauthorized', 'again', 401))).toBe(false);
    expect(k.status).toBe('unauthorized');
    expect(fetchFn).toHaveBeenCalledTimes(2);
  });

  it('may ask again after the new token has worked once', async () => {
    fetchFn
      .mockResolvedValueOnce(json(201, session('c2cw_a', 1_001_800)))
      .mockResolvedValueOnce(json(201, session('c2cw_b', 1_001_800)))
      .mockResolvedValueOnce(json(201, session('c2cw_c', 1_001_800)));
    const k = keeper();
    await k.start();
    expect(await k.rejected(new SdkError('unauthorized', 'x', 401))).toBe(true);
    k.confirm();
    expect(await k.rejected(new SdkError('unauthorized', 'x', 401))).toBe(true);
    expect(k.token).toBe('c2cw_c');
    k.stop();
  });

  it('ends unauthorized when sessionEndpoint refuses the user, error when the platform is off', async () => {
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_001_800))).mockResolvedValueOnce(json(403, { ok: false, error: 'agent_disabled', message: 'no' }));
    const k = keeper();
    await k.start();
    expect(await k.rejected(new SdkError('unauthorized', 'x', 401))).toBe(false);
    expect(k.status).toBe('unauthorized');

    const k2 = keeper();
    fetchFn.mockResolvedValueOnce(json(201, session('c2cw_a', 1_001_800)));
    await k2.start();
    expect(await k2.rejected(new SdkError('platform_disabled', 'off', 403))).toBe(false);
    expect(k2.status).toBe('error');
    expect(fetchFn).toHaveBeenCalledTimes(3);
  });

  it('retries sessionEndpoint while it does not answer, with backoff', async () => {
    fetchFn.mockRejectedValueOnce(new TypeError('Failed to fetch')).mockResolvedValueOnce(json(503, { ok: false, error: 'unreachable', message: 'down' })).mockResolvedValueOnce(json(201, session('c2cw_a', 1_001_800)));
    // full jitter: a random share of 1 s, then of 2 s (the share here: 99 %)
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.99);
    const k = keeper();
    const started = k.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(fetchFn).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(989);
    expect(fetchFn).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(fetchFn).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(1979);
    expect(fetchFn).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(await started).toBe(true);
    expect(fetchFn).toHaveBeenCalledTimes(3);
    expect(statuses).toEqual(['loading', 'active']);
    random.mockRestore();
    k.stop();
  });

  it('classifies refusals of sessionEndpoint', () => {
    expect(refusalState(new SdkError('unauthorized', '', 401))).toBe('unauthorized');
    expect(refusalState(new SdkError('http_403', '', 403))).toBe('unauthorized');
    expect(refusalState(new SdkError('agent_unknown', '', 404))).toBe('unauthorized');
    expect(refusalState(new SdkError('platform_disabled', '', 403))).toBe('error');
    expect(refusalState(new SdkError('http_404', '', 404))).toBe('error');
  });

  it('says error when sessionEndpoint answers something that is not a Session', async () => {
    fetchFn.mockResolvedValueOnce(json(200, { ok: true }));
    const k = keeper();
    expect(await k.start()).toBe(false);
    expect(k.status).toBe('error');
  });
});
