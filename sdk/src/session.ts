/**
 * The widget session (spec section 5): every page load asks the integrator's sessionEndpoint; the
 * token is refreshed before it expires (POST /widget/refresh); a rejected token makes the SDK ask
 * sessionEndpoint once more, and a second refusal is final (unauthorized).
 */
import type { IntegratorSession } from './contract.js';
import { REQUEST_TIMEOUT_MS, SdkError, isFatal, isTransient, postIntegrator, type FetchLike, type HttpAnswer } from './http.js';
import type { SessionStatus } from './machine.js';
import { fullJitter, refreshDelayMs, type Clock, type TimerHandle } from './timing.js';

export interface SessionDeps {
  fetch: FetchLike;
  clock: Clock;
  integrationId: string;
  sessionEndpoint: string;
  headers: Record<string, string>;
  origin: string;
  /** POST /widget/refresh with the current token */
  refreshCall: () => Promise<HttpAnswer<{ widget_token: string; expires_at: number }>>;
  /** the server's clock, ms (see Snapshots.serverNowMs) */
  serverNowMs: () => number;
  onStatus: (status: SessionStatus, error?: SdkError) => void;
  /** a new token is in use (after a refresh or a new session) */
  onToken: (session: IntegratorSession | null) => void;
}

/**
 * What a refusal of sessionEndpoint means: the service's codes and 401/403 say this user may not
 * have a session (unauthorized); platform_disabled or an endpoint that does not answer the
 * contract (a 404 page, a 400) is an error.
 */
export function refusalState(error: SdkError): 'unauthorized' | 'error' {
  if (isFatal(error)) return 'error';
  return error.status === 401 || error.status === 403 || !error.code.startsWith('http_') ? 'unauthorized' : 'error';
}

export class SessionKeeper {
  status: SessionStatus = 'none';
  token: string | null = null;
  expiresAt: number | null = null;
  session: IntegratorSession | null = null;
  private reasked = false;
  private renewing: Promise<boolean> | null = null;
  /** a refresh is on its way, or failed and waits on refreshTimer to be tried again */
  private refreshing: 'sent' | 'retrying' | null = null;
  private refreshTimer: TimerHandle | undefined;
  private backoffTimer: TimerHandle | undefined;
  private wake: (() => void) | null = null;
  private stopped = false;
  private readyWaiters: Array<(ok: boolean) => void> = [];
  /** the sessionEndpoint request in flight, if any (endSession waits for its token, to revoke it) */
  asking: Promise<unknown> | null = null;

  constructor(private readonly d: SessionDeps) {}

  /** First session of the page load. Transient failures are retried with backoff. */
  async start(): Promise<boolean> {
    this.setStatus('loading');
    return this.obtain();
  }

  /** Resolves true once a token is usable, false if the session ended for good. */
  ready(): Promise<boolean> {
    if (this.status === 'active') return Promise.resolve(true);
    if (this.stopped || this.status === 'unauthorized' || this.status === 'error') return Promise.resolve(false);
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  /** A request with the current token succeeded: a later rejection may re-ask the session again. */
  confirm(): void {
    this.reasked = false;
  }

  /**
   * The service rejected the token. Asks sessionEndpoint once (concurrent callers share the
   * attempt); resolves true when a new token is in use, false when the session is over.
   */
  rejected(error?: SdkError): Promise<boolean> {
    if (this.stopped || this.status === 'unauthorized' || this.status === 'error') return Promise.resolve(false);
    if (isFatal(error)) return Promise.resolve(this.fail('error', error!));
    if (this.renewing) return this.renewing;
    if (this.reasked) return Promise.resolve(this.fail('unauthorized', error ?? new SdkError('unauthorized', 'The widget token was refused.', 401)));
    this.reasked = true;
    this.setStatus('renewing');
    this.renewing = this.obtain().finally(() => (this.renewing = null));
    return this.renewing;
  }

  /** Refreshes the token now (also used when the gateway says token_expired); one refresh at a time. */
  async refresh(attempt = 0): Promise<void> {
    if (this.refreshing === 'sent') return;
    this.d.clock.cancel(this.refreshTimer);
    this.refreshing = null;
    if (this.stopped || this.status !== 'active') return;
    const token = this.token;
    this.refreshing = 'sent';
    try {
      const answer = await this.d.refreshCall();
      this.refreshing = null;
      if (this.stopped || !answer.body) return;
      // a new session came meanwhile (a rejection asked the endpoint again): its token stays
      if (this.token !== token) return this.schedule();
      this.token = answer.body.widget_token;
      this.expiresAt = answer.body.expires_at;
      this.confirm();
      this.d.onToken(null);
      this.schedule();
    } catch (error) {
      this.refreshing = null;
      if (this.stopped) return;
      if (this.token !== token) return this.schedule();
      const expired = this.expiresAt === null || this.expiresAt * 1000 <= this.d.serverNowMs();
      if (isTransient(error) && !expired) {
        const retry = (error as SdkError).retryAfter;
        this.refreshing = 'retrying';
        this.refreshTimer = this.d.clock.after(retry ? retry * 1000 : 1000 + fullJitter(attempt, 1000, 20_000), () => void this.refresh(attempt + 1));
      } else {
        await this.rejected(error as SdkError);
      }
    }
  }

  /**
   * (Re)schedules the refresh from the current expiry and the server clock (every snapshot moves
   * the server clock). Not while a refresh is on its way or waits to be tried again: that retry's
   * backoff would be pushed back each time, towards the token's expiry.
   */
  schedule(): void {
    if (this.refreshing) return;
    this.d.clock.cancel(this.refreshTimer);
    if (this.stopped || this.expiresAt === null) return;
    this.refreshTimer = this.d.clock.after(refreshDelayMs(this.expiresAt, this.d.serverNowMs()), () => void this.refresh());
  }

  /** Ends the session as an error (the service answered something the SDK cannot act on). */
  abort(error: SdkError): void {
    if (!this.stopped && this.status !== 'unauthorized' && this.status !== 'error') this.fail('error', error);
  }

  stop(): void {
    this.stopped = true;
    this.d.clock.cancel(this.refreshTimer);
    this.d.clock.cancel(this.backoffTimer);
    this.wake?.();
    this.flushWaiters(false);
  }

  /** Asks sessionEndpoint until it answers; a refusal is final. */
  private async obtain(): Promise<boolean> {
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        const asking = postIntegrator<IntegratorSession>(
          this.d.fetch,
          this.d.sessionEndpoint,
          { integration_id: this.d.integrationId, origin: this.d.origin },
          this.d.headers,
          { clock: this.d.clock, ms: REQUEST_TIMEOUT_MS },
        ).then((answer) => {
          // Stopped while it was asked (a logout right after the page loaded): the token is held
          // only so that endSession, which waits for this, can revoke it; nothing else uses it.
          if (this.stopped && typeof answer.body?.widget_token === 'string') this.token = answer.body.widget_token;
          return answer;
        });
        this.asking = asking;
        const answer = await asking.finally(() => {
          if (this.asking === asking) this.asking = null;
        });
        const session = answer.body;
        if (!session || typeof session.widget_token !== 'string' || typeof session.expires_at !== 'number') {
          return this.fail('error', new SdkError('invalid_session', 'sessionEndpoint must answer the Session of POST /sessions (widget_token, expires_at).', answer.status));
        }
        if (this.stopped) return false;
        this.session = session;
        this.token = session.widget_token;
        this.expiresAt = session.expires_at;
        // The token first, then the status: what the widget holds of a previous session (another
        // agent's state) is dealt with before the widget shows anything as active.
        this.d.onToken(session);
        this.setStatus('active');
        // the old token's refresh retry, if one waits, has nothing left to refresh
        if (this.refreshing === 'retrying') this.refreshing = null;
        this.schedule();
        this.flushWaiters(true);
        return true;
      } catch (error) {
        if (this.stopped) return false;
        if (!isTransient(error)) return this.fail(refusalState(error as SdkError), error as SdkError);
        const retry = (error as SdkError).retryAfter;
        // stop() cancels the wait and wakes it, so no timer outlives the session
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          this.backoffTimer = this.d.clock.after(retry ? retry * 1000 : fullJitter(attempt, 1000, 30_000), resolve);
        });
        this.wake = null;
      }
    }
    return false;
  }

  private fail(status: 'unauthorized' | 'error', error: SdkError): false {
    this.d.clock.cancel(this.refreshTimer);
    this.refreshing = null;
    this.setStatus(status, error);
    this.flushWaiters(false);
    return false;
  }

  private setStatus(status: SessionStatus, error?: SdkError): void {
    this.status = status;
    this.d.onStatus(status, error);
  }

  private flushWaiters(ok: boolean): void {
    const waiters = this.readyWaiters;
    this.readyWaiters = [];
    for (const resolve of waiters) resolve(ok);
  }
}
