/**
 * JSON over fetch, for the widget API (bearer widget token; only the headers its CORS allows) and
 * for the integrator's two endpoints (same-origin credentials plus the `headers` option). Every
 * failure becomes an SdkError with a machine code and the HTTP status (0: no answer). Every
 * request has a time limit: a request that hangs (a proxy holding the connection, a server that
 * accepted it and died) would otherwise hold whatever waits on it for good, the polling loop or a
 * command's promise. Past the limit it is aborted and counts as no answer (`unreachable`), which
 * every caller already retries or reports.
 */
import { within } from './deadline.js';
import type { Clock } from './timing.js';

export class SdkError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status = 0,
    /** seconds, from Retry-After */
    readonly retryAfter?: number,
    /** the parsed JSON body of a refusal, as the server sent it */
    readonly body?: unknown,
  ) {
    super(message);
    this.name = 'SdkError';
  }
}

export interface HttpAnswer<T = unknown> {
  status: number;
  body: T | null;
  etag: string | null;
}

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** Credentials the service refuses for this token only: asking the session endpoint again may help. */
const REJECTIONS = new Set(['unauthorized', 'origin_not_allowed', 'integration_disabled', 'agent_disabled', 'agent_not_assigned', 'agent_unknown']);

export const isRejection = (e: unknown): boolean => e instanceof SdkError && REJECTIONS.has(e.code);
/** Refused for everyone: nothing this page does will help. */
export const isFatal = (e: unknown): boolean => e instanceof SdkError && e.code === 'platform_disabled';
/** No answer, a server hiccup or a rate limit: the same request may succeed later. */
export const isTransient = (e: unknown): boolean =>
  e instanceof SdkError && (e.status === 0 || e.status === 429 || (e.status >= 500 && e.code !== 'hangup_uncertain'));

/** How long a request may take, answer body included, before it counts as unanswered. */
export const REQUEST_TIMEOUT_MS = 10_000;

/** A request's time limit, on the SDK's clock. */
export interface Bound {
  clock: Clock;
  ms: number;
}

/**
 * Sends a request; resolves for 2xx and 304, throws SdkError otherwise (`unreachable` once
 * `bound.ms` pass without the whole answer: the request is aborted, and a fetch that ignores the
 * abort is no longer waited for).
 */
export async function send<T>(fetchFn: FetchLike, url: string, init: RequestInit, bound: Bound): Promise<HttpAnswer<T>> {
  const abort = new AbortController();
  const late = () => {
    abort.abort();
    return new SdkError('unreachable', 'The service did not answer in time.');
  };
  return within(bound.clock, bound.ms, exchange<T>(fetchFn, url, { ...init, signal: abort.signal }), late);
}

async function exchange<T>(fetchFn: FetchLike, url: string, init: RequestInit): Promise<HttpAnswer<T>> {
  let response: Response;
  try {
    response = await fetchFn(url, init);
  } catch (cause) {
    throw new SdkError('unreachable', (cause as Error)?.message || 'The request could not be sent.');
  }
  const etag = response.headers.get('etag');
  if (response.status === 304) return { status: 304, body: null, etag };
  let body: unknown = null;
  const text = await response.text().catch(() => '');
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (response.ok) return { status: response.status, body: body as T, etag };
  const envelope = (body ?? {}) as { error?: unknown; message?: unknown };
  const retry = Number(response.headers.get('retry-after'));
  throw new SdkError(
    typeof envelope.error === 'string' ? envelope.error : response.status >= 500 ? 'unreachable' : 'http_' + response.status,
    typeof envelope.message === 'string' ? envelope.message : `HTTP ${response.status}`,
    response.status,
    Number.isFinite(retry) && retry > 0 ? retry : undefined,
    body ?? undefined,
  );
}

/**
 * A client for {apiBaseUrl}/widget/… with the current widget token. A request is given
 * REQUEST_TIMEOUT_MS unless the caller says otherwise (a command attempt has its own).
 */
/** Requests that act on the token they carry (a refresh replaces it, a revoke ends it). */
const ACTS_ON_ITS_TOKEN = new Set(['/widget/refresh', '/widget/revoke']);

export function widgetApi(fetchFn: FetchLike, baseUrl: string, token: () => string | null, clock: Clock) {
  const base = baseUrl.replace(/\/+$/, '');
  // beforeResend: throws instead when a request refused for a token replaced meanwhile may not go again with the new one (below)
  return async <T>(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}, timeoutMs = REQUEST_TIMEOUT_MS, beforeResend = () => {}) => {
    const sendWith = (bearer: string | null) =>
      sendWithToken<T>(fetchFn, base + path, {
        method,
        mode: 'cors',
        credentials: 'omit',
        // A conditional GET must reach the server, and its 304 must reach us.
        cache: 'no-store',
        headers: {
          authorization: `Bearer ${bearer ?? ''}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }, { clock, ms: timeoutMs });
    const sent = token();
    try {
      return await sendWith(sent);
    } catch (error) {
      // Refused for a token a new session replaced while the request was on its way: the refusal
      // is not about the current token, and counting it would end a session that had just been
      // renewed (a second refusal is final). It goes once more, with the current token; a
      // command's body keeps its request_id, so the service dedupes it. Not a refresh or a
      // revoke: those act on the token they carry, and the new token is not theirs to act on.
      const current = token();
      if (isRejection(error) && current !== null && current !== sent && !ACTS_ON_ITS_TOKEN.has(path)) {
        beforeResend();
        return sendWith(current);
      }
      throw error;
    }
  };
}

/** POSTs JSON to one of the integrator's endpoints, with same-origin cookies and its extra headers. */
export function postIntegrator<T>(fetchFn: FetchLike, url: string, body: unknown, headers: Record<string, string>, bound: Bound) {
  return send<T>(fetchFn, url, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  }, bound);
}

/**
 * A widget API request: a bare 401 (no envelope: an authenticating proxy in front of the API)
 * still says the token was refused, so it is `unauthorized` and the session is asked again. Only
 * here: from the integrator's own endpoints a 401 is the CRM's own login, not the service's.
 */
async function sendWithToken<T>(fetchFn: FetchLike, url: string, init: RequestInit, bound: Bound): Promise<HttpAnswer<T>> {
  try {
    return await send<T>(fetchFn, url, init, bound);
  } catch (error) {
    if (error instanceof SdkError && error.code === 'http_401') throw new SdkError('unauthorized', error.message, 401, error.retryAfter, error.body);
    throw error;
  }
}
