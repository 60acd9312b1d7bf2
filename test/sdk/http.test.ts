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

describe('answers without the envelope', () => {
  const bare = (status: number): FetchLike => async () => new Response('<html>denied</html>', { status, headers: { 'content-type': 'text/html' } });

  it('a bare 401 from the widget API is unauthorized (the session is asked again); from an integrator endpoint it stays http_401', async () => {
    const api = widgetApi(bare(401), 'https://c2c.example/api/v1/click2call', () => 'c2cw_1', systemClock);
    expect(await api('GET', '/widget/state').catch((e) => e)).toMatchObject({ code: 'unauthorized', status: 401 });
    const crm = await postIntegrator(bare(401), '/crm/call', {}, {}, { clock: systemClock, ms: 1000 }).catch((e) => e);
    expect(crm).toMatchObject({ code: 'http_401', status: 401 });
  });

  it('any other bare 4xx is http_<status>, a bare 5xx no answer from the service', async () => {
    const api = (status: number) => widgetApi(bare(status), 'https://c2c.example/api/v1/click2call', () => 'c2cw_1', systemClock)('GET', '/widget/state').catch((e) => e);
    expect(await api(403)).toMatchObject({ code: 'http_403', status: 403 });
    expect(await api(502)).toMatchObject({ code: 'unreachable', status: 502 });
  });
});

describe('a token replaced while its request was on its way', () => {
  /** Refuses the first token, after the page moved to the second meanwhile; accepts the second. */
  function replacedMeanwhile() {
    let token = 'c2cw_1';
    const sent: Array<{ path: string; bearer: string }> = [];
    const fetchFn: FetchLike = async (url, init) => {
      const bearer = (init!.headers as Record<string, string>).authorization!;
      sent.push({ path: new URL(url).pathname, bearer });
      if (bearer === 'Bearer c2cw_1') {
        token = 'c2cw_2'; // a new session came while this was on its way
        return new Response(JSON.stringify({ ok: false, error: 'unauthorized', message: 'refused' }), { status: 401 });
      }
      return new Response(JSON.stringify({ ok: true }), { status: 200 });
    };
    return { api: widgetApi(fetchFn, 'https://c2c.example/api/v1/click2call', () => token, systemClock), sent };
  }

  it('sends a request again with the new token, once', async () => {
    const { api, sent } = replacedMeanwhile();
    expect((await api('POST', '/widget/commands', { kind: 'mute', request_id: 'r1' })).body).toEqual({ ok: true });
    expect(sent.map((s) => s.bearer)).toEqual(['Bearer c2cw_1', 'Bearer c2cw_2']);
  });

  it('not a refresh or a revoke, which act on the token they carry: the refusal is theirs', async () => {
    for (const path of ['/widget/refresh', '/widget/revoke']) {
      const { api, sent } = replacedMeanwhile();
      expect(await api('POST', path).catch((e) => e)).toMatchObject({ code: 'unauthorized' });
      expect(sent).toHaveLength(1);
    }
  });
});
