/**
 * JSON over fetch, for the widget API (bearer widget token; only the headers its CORS allows) and
 * for the integrator's two endpoints (same-origin credentials plus the `headers` option). Every
 * failure becomes an SdkError with a machine code and the HTTP status (0: no answer).
 */
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

/** Sends a request; resolves for 2xx and 304, throws SdkError otherwise. */
export async function send<T>(fetchFn: FetchLike, url: string, init: RequestInit): Promise<HttpAnswer<T>> {
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

/** A client for {apiBaseUrl}/widget/… with the current widget token. */
export function widgetApi(fetchFn: FetchLike, baseUrl: string, token: () => string | null) {
  const base = baseUrl.replace(/\/+$/, '');
  return <T>(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}) =>
    send<T>(fetchFn, base + path, {
      method,
      mode: 'cors',
      credentials: 'omit',
      // A conditional GET must reach the server, and its 304 must reach us.
      cache: 'no-store',
      headers: {
        authorization: `Bearer ${token() ?? ''}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
}

/** POSTs JSON to one of the integrator's endpoints, with same-origin cookies and its extra headers. */
export function postIntegrator<T>(fetchFn: FetchLike, url: string, body: unknown, headers: Record<string, string> = {}) {
  return send<T>(fetchFn, url, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}
