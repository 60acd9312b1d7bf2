/** Pairing: the pair request, the stored pairing (sessionStorage, never the URL), and the messages for each refusal. */
import { describe, expect, it, vi } from 'vitest';
import { EngineApi, type Paired } from '../../window/src/api.js';
import { MESSAGES, useLanguage } from '../../window/src/messages.js';
import { STORAGE_KEY, establish, loadPairing } from '../../window/src/session.js';
import { memoryStorage } from '../helpers/storage.js';

const BASE = 'http://127.0.0.1:8080/api/v1/click2call';

const paired = (token = 'c2ce_one'): Paired => ({
  ok: true,
  engine_token: token,
  engine: { id: 'eng_1', state: 'enabling', live: true, available: true, mic_ready: false, busy: false, muted: false, simulated: true, last_seen_ago: 0, version: 1, client: 'window' },
  integration_id: 'c2c_demo',
  integration_name: 'Demo CRM',
  agent: { name: 'Ana', identifier: 'ana@example.com', type: 'email', department: null },
  policy: { outbound: true, inbound: true, number_visibility: 'show', controls: ['mute', 'dtmf'], widget: { position: 'bottom-right', language: 'en', window_mode: 'popup' }, max_call_seconds: 3600 },
  voice_provider: 'simulated',
  heartbeat_ms: 15_000,
  heartbeat_fallback_ms: 3000,
  realtime: { url: 'http://127.0.0.1:8081', path: '/socket.io', available: true },
});

type Route = (body: any, headers: Record<string, string>) => { status: number; body: unknown };

function fakeFetch(routes: Record<string, Route>) {
  return vi.fn(async (url: string | URL | Request, init?: RequestInit) => {
    const path = String(url).slice(BASE.length);
    const route = routes[path];
    if (!route) throw new TypeError('fetch failed');
    const result = route(init?.body ? JSON.parse(String(init.body)) : undefined, (init?.headers ?? {}) as Record<string, string>);
    return new Response(JSON.stringify(result.body), { status: result.status, headers: { 'content-type': 'application/json' } });
  });
}

const refusal = (status: number, error: string, message = 'refused') => ({ status, body: { ok: false, error, message } });
const heartbeatOk = { status: 200, body: { ok: true, engine: paired().engine, commands: [], dial_requests: [], call: null, heartbeat_ms: 15_000, server_time: 1_767_261_600 } };

describe('establish', () => {
  it('pairs with the ticket as a window (simulated when the page says so) and stores the pairing in sessionStorage', async () => {
    const pair = vi.fn<Route>(() => ({ status: 201, body: paired() }));
    const api = new EngineApi(BASE, fakeFetch({ '/engine/pair': pair }));
    const storage = memoryStorage();
    const result = await establish(api, storage, 'c2cl_ticket', true);
    expect(pair.mock.calls[0]![0]).toEqual({ ticket: 'c2cl_ticket', simulated: true, client: 'window', attempt: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(pair.mock.calls[0]![1]).not.toHaveProperty('authorization');
    expect(result).toMatchObject({ ok: true, first: null });
    expect(api.token).toBe('c2ce_one');
    expect(loadPairing(storage, BASE)?.engine_token).toBe('c2ce_one');
  });

  it('asks again with the same attempt id when the answer was lost, and pairs with the answer the service gives it; another ticket has its own', async () => {
    const seen: string[] = [];
    let lost = true;
    const api = new EngineApi(
      BASE,
      fakeFetch({
        '/engine/pair': (body) => {
          seen.push(body.attempt);
          if (lost) {
            lost = false;
            throw new TypeError('fetch failed'); // the service paired; the answer never came
          }
          return { status: 201, body: paired() };
        },
      }),
    );
    const storage = memoryStorage();
    expect(await establish(api, storage, 'c2cl_lost', true)).toMatchObject({ ok: false, reason: 'unreachable', retry: true });
    expect(await establish(api, storage, 'c2cl_lost', true)).toMatchObject({ ok: true });
    expect(seen).toHaveLength(2);
    expect(seen[1]).toBe(seen[0]);
    await establish(api, storage, 'c2cl_next', true);
    expect(seen[2]).not.toBe(seen[0]);
  });

  it('pairs with a node of an earlier release, which refuses the attempt id it does not know, by asking again without it', async () => {
    const bodies: any[] = [];
    const api = new EngineApi(
      BASE,
      fakeFetch({
        '/engine/pair': (body) => {
          bodies.push(body);
          return 'attempt' in body ? refusal(422, 'invalid_request', 'attempt: Unrecognized key') : { status: 201, body: paired() };
        },
      }),
    );
    expect(await establish(api, memoryStorage(), 'c2cl_old_node', true)).toMatchObject({ ok: true });
    expect(bodies.map((b) => 'attempt' in b)).toEqual([true, false]);
  });

  it('keeps a new pairing only once it is allowed (the consent question), so a reload meanwhile cannot carry it on; a no closes its engine', async () => {
    const close = vi.fn<Route>(() => ({ status: 200, body: { ok: true } }));
    const api = new EngineApi(BASE, fakeFetch({ '/engine/pair': () => ({ status: 201, body: paired() }), '/engine/close': close }));
    const storage = memoryStorage();
    let answer: (yes: boolean) => void = () => {};
    let asked: () => void = () => {};
    const questionAsked = new Promise<void>((resolve) => (asked = resolve));
    const outcome = establish(api, storage, 'c2cl_ticket', true, () => {
      asked();
      return new Promise<boolean>((decide) => (answer = decide));
    });
    await questionAsked;
    expect(loadPairing(storage, BASE)).toBeNull(); // a reload now finds nothing to carry on
    answer(false);
    await expect(outcome).resolves.toEqual({ ok: false, reason: 'declined', message: MESSAGES.consentDeclined, retry: false });
    await vi.waitFor(() => expect(close).toHaveBeenCalled());
    expect(close.mock.calls[0]![0]).toEqual({ reason: 'declined' });
    expect(close.mock.calls[0]![1].authorization).toBe('Bearer c2ce_one');
    expect(loadPairing(storage, BASE)).toBeNull();
    expect(api.token).toBeNull();

    const yes = await establish(new EngineApi(BASE, fakeFetch({ '/engine/pair': () => ({ status: 201, body: paired('c2ce_two') }) })), storage, 'c2cl_other', true, async () => true);
    expect(yes).toMatchObject({ ok: true });
    expect(loadPairing(storage, BASE)?.engine_token).toBe('c2ce_two');
  });

  it('continues a stored pairing without a ticket when a heartbeat still accepts the token', async () => {
    const storage = memoryStorage();
    storage.setItem(STORAGE_KEY, JSON.stringify({ apiBaseUrl: BASE, paired: paired('c2ce_stored') }));
    const heartbeat = vi.fn<Route>(() => heartbeatOk);
    const api = new EngineApi(BASE, fakeFetch({ '/engine/heartbeat': heartbeat }));
    const result = await establish(api, storage, null, true);
    expect(result.ok).toBe(true);
    expect(heartbeat.mock.calls[0]![1].authorization).toBe('Bearer c2ce_stored');
    expect(heartbeat.mock.calls[0]![0]).toMatchObject({ state: 'enabling', mic_ready: false, call_id: null, acks: [] });
  });

  it('without a ticket and without a working stored token, says to open the window again from the widget', async () => {
    const storage = memoryStorage();
    storage.setItem(STORAGE_KEY, JSON.stringify({ apiBaseUrl: BASE, paired: paired('c2ce_closed') }));
    const api = new EngineApi(BASE, fakeFetch({ '/engine/heartbeat': () => refusal(401, 'unauthorized') }));
    expect(await establish(api, storage, null, true)).toEqual({ ok: false, reason: 'no_ticket', message: MESSAGES.noTicket, retry: false });
    expect(storage.getItem(STORAGE_KEY)).toBeNull();
    expect(await establish(new EngineApi(BASE, fakeFetch({})), memoryStorage(), null, true)).toMatchObject({ reason: 'no_ticket', message: 'Open the call window again from the widget.' });
  });

  it('keeps the stored pairing when the service is only unreachable', async () => {
    const storage = memoryStorage();
    storage.setItem(STORAGE_KEY, JSON.stringify({ apiBaseUrl: BASE, paired: paired() }));
    const result = await establish(new EngineApi(BASE, fakeFetch({})), storage, null, true);
    expect(result).toMatchObject({ ok: false, reason: 'unreachable', retry: true });
    expect(storage.getItem(STORAGE_KEY)).not.toBeNull();
  });

  it('keeps a stored pairing refused with 403 (switched off for now) and says why in its own words', async () => {
    const storage = memoryStorage();
    storage.setItem(STORAGE_KEY, JSON.stringify({ apiBaseUrl: BASE, paired: paired() }));
    const api = new EngineApi(BASE, fakeFetch({ '/engine/heartbeat': () => refusal(403, 'platform_disabled', 'The service is disabled platform-wide.') }));
    expect(await establish(api, storage, null, true)).toEqual({ ok: false, reason: 'refused', message: MESSAGES.platformDisabled, retry: true });
    expect(storage.getItem(STORAGE_KEY)).not.toBeNull();
  });

  it('gives 401 ticket_invalid and 409 agent_busy clear, distinct messages; only agent_busy can be retried with the same ticket', async () => {
    const invalid = await establish(new EngineApi(BASE, fakeFetch({ '/engine/pair': () => refusal(401, 'ticket_invalid') })), memoryStorage(), 'c2cl_used', false);
    const busy = await establish(new EngineApi(BASE, fakeFetch({ '/engine/pair': () => refusal(409, 'agent_busy') })), memoryStorage(), 'c2cl_fresh', false);
    expect(invalid).toEqual({ ok: false, reason: 'ticket_invalid', message: MESSAGES.ticketInvalid, retry: false });
    expect(busy).toEqual({ ok: false, reason: 'agent_busy', message: MESSAGES.agentBusy, retry: true });
    expect(invalid.ok || busy.ok || invalid.message === busy.message).toBe(false);
  });

  it('says why in its own words, in the language it speaks, for the refusals it knows (403 integration or agent checks), and gives the server message for others', async () => {
    const api = new EngineApi(BASE, fakeFetch({ '/engine/pair': () => refusal(403, 'agent_disabled', 'Calls are disabled for this member.') }));
    useLanguage('fr');
    try {
      expect(await establish(api, memoryStorage(), 'c2cl_x', false)).toEqual({ ok: false, reason: 'refused', message: 'Les appels ne sont pas activés pour vous dans cette intégration.', retry: false });
    } finally {
      useLanguage('en');
    }
    const other = new EngineApi(BASE, fakeFetch({ '/engine/pair': () => refusal(403, 'origin_not_allowed', 'This extension is not allowed on this server.') }));
    expect(await establish(other, memoryStorage(), 'c2cl_y', false)).toEqual({ ok: false, reason: 'refused', message: 'This extension is not allowed on this server.', retry: false });
  });
});
