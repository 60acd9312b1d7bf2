/**
 * Keeping the voice driver supplied: POST /engine/voice-token right after pairing (which also
 * registers the engine, making it routable for incoming calls), then a fresh token before the
 * current one expires (checked on every heartbeat tick, which the Worker keeps on time, and when
 * the driver says its token is about to expire), handed to the driver with updateToken.
 */
import type { EngineApi } from './api.js';
import type { VoiceDriver } from './drivers/types.js';
import { MESSAGES } from './messages.js';

/** Fetch a new voice token this long before the current one expires. */
export const VOICE_REFRESH_MARGIN_MS = 5 * 60_000;
/**
 * After an attempt that left no usable token (the provider unavailable, a token that expires within
 * the margin), the next heartbeat tick asks again no sooner than this: every attempt is followed by
 * a heartbeat, which would otherwise ask again at once, once per round trip.
 */
export const VOICE_RETRY_MS = 3000;

export interface VoiceKeeperDeps {
  api: EngineApi;
  driver(): VoiceDriver | null;
  /** a refusal: true when it was final (the engine stops) */
  onRefused(error: unknown): boolean;
  /** the problem to show, or null when all is well */
  onProblem(text: string | null): void;
  /** after every attempt */
  onSettled(): void;
}

export class VoiceKeeper {
  readonly #deps: VoiceKeeperDeps;
  #token: { token: string; expiresAtMs: number } | null = null;
  #inFlight: Promise<void> | null = null;
  /** server time of the last attempt maybeRefresh started */
  #triedAtMs = -Infinity;

  constructor(deps: VoiceKeeperDeps) {
    this.#deps = deps;
  }

  /** Refreshes when there is no token yet or it expires within the margin (server time), at most every VOICE_RETRY_MS. */
  maybeRefresh(serverNowMs: number): void {
    const token = this.#token;
    if (token && serverNowMs < token.expiresAtMs - VOICE_REFRESH_MARGIN_MS) return;
    if (this.#inFlight || serverNowMs < this.#triedAtMs + VOICE_RETRY_MS) return;
    this.#triedAtMs = serverNowMs;
    void this.refresh();
  }

  /** Fetches a token, then starts the driver with it or hands it over. One at a time. */
  refresh(): Promise<void> {
    this.#inFlight ??= this.#run().finally(() => {
      this.#inFlight = null;
      this.#deps.onSettled();
    });
    return this.#inFlight;
  }

  async #run(): Promise<void> {
    const deps = this.#deps;
    try {
      const answer = await deps.api.voiceToken();
      this.#token = { token: answer.token, expiresAtMs: answer.expires_at * 1000 };
      deps.onProblem(null);
    } catch (error) {
      if (deps.onRefused(error)) return;
      deps.onProblem(MESSAGES.voiceUnavailable);
    }
    const driver = deps.driver();
    if (!driver) return;
    try {
      // The simulated driver needs no token, so a provider outage does not stop it.
      if (!driver.ready && (this.#token || driver.kind === 'simulated')) await driver.start(this.#token?.token ?? '');
      else if (driver.ready && this.#token) driver.updateToken(this.#token.token);
    } catch (error) {
      deps.onProblem(error instanceof Error ? error.message : String(error));
    }
  }
}
