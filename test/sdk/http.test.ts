/** Requests to the service and the integrator's endpoints: every one has a time limit. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { REQUEST_TIMEOUT_MS, postIntegrator, widgetApi, type FetchLike } from '../../sdk/src/http.js';
import { systemClock } from '../../sdk/src/timing.js';

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

/** A fetch that never answers and ignores its abort (a proxy holding the connection); it keeps the signals it was given. */
function hangingFetch() {
  const signals: AbortSignal[] = [];
  const fetchFn: FetchLike = (_url, init) => {
    signals.push(init!.signal!);
    return new Promise<Response>(() => {});
  };
  return { fetchFn, signals };
}

describe('request time limits', () => {
  it('gives up a widget API request after REQUEST_TIMEOUT_MS: aborted, and unreachable (status 0)', async () => {
    const { fetchFn, signals } = hangingFetch();
    const api = widgetApi(fetchFn, 'https://c2c.example/api/v1/click2call', () => 'c2cw_1', systemClock);
    const seen = api('GET', '/widget/state').catch((e) => e);
    await vi.advanceTimersByTimeAsync(REQUEST_TIMEOUT_MS - 1);
    expect(signals[0]!.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(signals[0]!.aborted).toBe(true);
    expect(await seen).toMatchObject({ name: 'SdkError', code: 'unreachable', status: 0 });
  });

  it("takes the caller's own limit (a command attempt's) and the integrator endpoint's", async () => {
    const { fetchFn } = hangingFetch();
    const api = widgetApi(fetchFn, 'https://c2c.example/api/v1/click2call', () => 'c2cw_1', systemClock);
    const command = api('POST', '/widget/commands', { kind: 'mute' }, {}, 5000).catch((e) => e);
    const session = postIntegrator(fetchFn, '/crm/session', {}, {}, { clock: systemClock, ms: 2000 }).catch((e) => e);
    await vi.advanceTimersByTimeAsync(2000);
    expect(await session).toMatchObject({ code: 'unreachable' });
    await vi.advanceTimersByTimeAsync(3000);
    expect(await command).toMatchObject({ code: 'unreachable' });
  });

  it('leaves an answer in time as it is', async () => {
    const fetchFn: FetchLike = async () => new Response(JSON.stringify({ ok: true }), { status: 200, headers: { etag: '"1"' } });
    const api = widgetApi(fetchFn, 'https://c2c.example/api/v1/click2call', () => 'c2cw_1', systemClock);
    expect(await api('GET', '/widget/state')).toEqual({ status: 200, body: { ok: true }, etag: '"1"' });
    expect(vi.getTimerCount()).toBe(0);
  });
});
