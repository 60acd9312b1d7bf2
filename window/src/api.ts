/**
 * The engine endpoints over fetch (docs/engine-protocol.md). Every refusal becomes an ApiError
 * carrying the envelope's code; a network failure is an ApiError with status 0 and code
 * `unreachable`, and so is a request not answered within REQUEST_TIMEOUT_MS. The engine token goes
 * in the Authorization header, never in a URL.
 */
import type { ErrorCode } from '../../shared/errors.js';
import { retryAfterMs } from '../../shared/events.js';
import type { DialRequest, EngineCommand, HeartbeatRequest, HeartbeatResponse } from '../../shared/schemas/engine-api.js';
import type { Call, Engine, Policy, Realtime, WidgetAgent } from '../../shared/types.js';
import type { ConnectParams } from './drivers/types.js';

export type { DialRequest, EngineCommand, HeartbeatRequest, HeartbeatResponse };

/** 201 of POST /engine/pair. */
export interface Paired {
  ok: true;
  engine_token: string;
  engine: Engine;
  integration_id: string;
  /** the integration's name, set by the service's operator (the consent question names it); absent from nodes older than it */
  integration_name?: string;
  agent: WidgetAgent;
  policy: Policy;
  voice_provider: 'simulated' | 'twilio';
  heartbeat_ms: number;
  heartbeat_fallback_ms: number;
  realtime: Realtime;
}

export interface VoiceToken {
  ok: true;
  provider: 'simulated' | 'twilio';
  token: string;
  identity: string;
  expires_at: number;
}

export interface Claimed {
  ok: true;
  call: Call;
  connect: { params: ConnectParams };
}

export type CommandAck = HeartbeatRequest['acks'][number];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode | 'unreachable' | 'unknown',
    message: string,
    /** how long the server asked for before trying again (REST's Retry-After, a socket answer's retry_after), in ms; 0 if it did not say */
    readonly retryAfterMs = 0,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export type Fetch = typeof fetch;

/**
 * How long a request may take, answer body included. Past it the request is aborted and counts as
 * unanswered: one heartbeat that hangs would otherwise hold the next ones (never two at once) until
 * the server took the engine for gone (90 s without a heartbeat), and a hung claim or hangup the
 * agent's call.
 */
export const REQUEST_TIMEOUT_MS = 10_000;

export class EngineApi {
  token: string | null = null;

  constructor(
    readonly baseUrl: string,
    private readonly fetcher: Fetch = (...args) => fetch(...args),
  ) {}

  /** `attempt`: the same for every try with this ticket, so a try whose answer was lost is answered again (engines/pair.ts). */
  pair(ticket: string, simulated: boolean, attempt?: string): Promise<Paired> {
    return this.#post('/engine/pair', { ticket, simulated, client: 'window', ...(attempt === undefined ? {} : { attempt }) }, false);
  }

  voiceToken(): Promise<VoiceToken> {
    return this.#post('/engine/voice-token', undefined);
  }

  heartbeat(report: HeartbeatRequest): Promise<HeartbeatResponse> {
    return this.#post('/engine/heartbeat', report);
  }

  claim(requestId: string): Promise<Claimed> {
    return this.#post('/engine/claim', { request_id: requestId });
  }

  /** The window's Answer button: the server answers a simulated device's call; a real device's answer reaches it from the provider. */
  answer(callId: string): Promise<{ ok: true; call: Call }> {
    return this.#post('/engine/answer', { call_id: callId });
  }

  hangup(callId: string | null): Promise<{ ok: true; call: Call | null }> {
    return this.#post('/engine/hangup', callId ? { call_id: callId } : {});
  }

  /** Closes this window's engine: it will carry no calls (the agent's widget shows it closed). */
  close(reason: string): Promise<unknown> {
    return this.#post('/engine/close', { reason });
  }

  /** The window is going away: a keepalive request that outlives the page. */
  closeOnUnload(): void {
    if (!this.token) return;
    void this.fetcher(`${this.baseUrl}/engine/close`, {
      method: 'POST',
      keepalive: true,
      headers: { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'unload' }),
    }).catch(() => {});
  }

  async #post<T>(path: string, body: unknown, authorized = true): Promise<T> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (authorized) {
      if (!this.token) throw new ApiError(401, 'unauthorized', 'The window is not paired.');
      headers.authorization = `Bearer ${this.token}`;
    }
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    // A fetch that ignores the abort is not waited for either.
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        abort.abort();
        reject(new ApiError(0, 'unreachable', 'The click-to-call service did not answer in time.'));
      }, REQUEST_TIMEOUT_MS);
    });
    try {
      return await Promise.race([this.#exchange<T>(path, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body), signal: abort.signal }), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #exchange<T>(path: string, init: RequestInit): Promise<T> {
    let response: Response;
    try {
      response = await this.fetcher(`${this.baseUrl}${path}`, init);
    } catch {
      throw new ApiError(0, 'unreachable', 'The click-to-call service could not be reached.');
    }
    const payload = (await response.json().catch(() => null)) as { ok?: boolean; error?: string; message?: string } | null;
    if (response.ok && payload?.ok) return payload as T;
    const code = (typeof payload?.error === 'string' ? payload.error : 'unknown') as ApiError['code'];
    throw new ApiError(response.status, code, payload?.message ?? `The service answered ${response.status}.`, retryAfterMs(response.headers.get('retry-after')));
  }
}
