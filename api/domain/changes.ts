/**
 * What a transaction changed, announced on the bus only after it commits, so no node ever pushes
 * or invalidates on a change that rolled back.
 */
import type { EngineWork } from '../../shared/events.js';
import type { Bus } from '../bus/index.js';
import type { Sql } from '../store/index.js';
import { bumpAgentVersion } from './agent-state.js';

export class Changes {
  readonly #agents = new Map<string, { integrationId: string; memberId: string; version: number }>();
  readonly #engineWork = new Map<string, EngineWork | undefined>();
  /** per closed engine, why (its close_reason: `replaced` by a newer window, the window's own, `integration_revoked`) */
  readonly #enginesClosed = new Map<string, string>();
  readonly #sessions = new Map<string, string>();
  /** engines given a new token, the old one to stop */
  readonly #enginesRetokened = new Set<string>();
  /** when the change began to be made (its transaction sent; ms since the epoch): the push latency counts from it */
  #startedAt = epochMs();

  /** Bumps the agent's WidgetState version inside the transaction and records it. */
  async touchAgent(sql: Sql, integrationId: string, memberId: string): Promise<number> {
    const version = await bumpAgentVersion(sql, integrationId, memberId);
    this.agentTouched(integrationId, memberId, version);
    return version;
  }

  /** Records a version bump the transaction made in a statement of its own (agentVersionBump). */
  agentTouched(integrationId: string, memberId: string, version: number): this {
    const key = `${integrationId}:${memberId}`;
    // The newest wins, whatever order bumps are recorded or merged in: nodes skip reading a version older than one they hold.
    if (version > (this.#agents.get(key)?.version ?? 0)) this.#agents.set(key, { integrationId, memberId, version });
    return this;
  }

  /**
   * The engine has new commands or dial requests; `handedOver` when the transaction handed them
   * over after its last change to them (the push then leaves without reading them again).
   */
  engineWork(engineId: string, handedOver?: EngineWork): this {
    this.#engineWork.set(engineId, handedOver);
    return this;
  }

  /**
   * The engine should heartbeat now (a call rings for it): it is pushed an empty `work`, the nudge
   * a window answers with a heartbeat, whose answer carries the call and any queued work. Queued
   * commands do not ride on the nudge, so a `focus` among them cannot hide it (a window sends no
   * heartbeat for a focus the socket acked).
   */
  nudgeEngine(engineId: string): this {
    return this.engineWork(engineId, { commands: [], dial_requests: [] });
  }

  engineClosed(engineId: string, why: string): this {
    this.#enginesClosed.set(engineId, why);
    return this;
  }

  engineRetokened(engineId: string): this {
    this.#enginesRetokened.add(engineId);
    return this;
  }

  sessionEnded(sessionId: string, reason: string): this {
    this.#sessions.set(sessionId, reason);
    return this;
  }

  merge(other: Changes): this {
    this.#startedAt = Math.min(this.#startedAt, other.#startedAt);
    for (const { integrationId, memberId, version } of other.#agents.values()) this.agentTouched(integrationId, memberId, version);
    for (const [id, work] of other.#engineWork) this.engineWork(id, work);
    for (const [id, why] of other.#enginesClosed) this.#enginesClosed.set(id, why);
    for (const id of other.#enginesRetokened) this.#enginesRetokened.add(id);
    for (const [id, reason] of other.#sessions) this.#sessions.set(id, reason);
    return this;
  }

  publish(bus: Bus): void {
    const at = this.#startedAt;
    for (const agent of this.#agents.values()) bus.publish({ type: 'agent', ...agent, at });
    for (const [engineId, work] of this.#engineWork) bus.publish({ type: 'engine', engineId, reason: 'work', ...(work && { work }), at });
    for (const [engineId, why] of this.#enginesClosed) bus.publish({ type: 'engine', engineId, reason: 'closed', why });
    for (const engineId of this.#enginesRetokened) bus.publish({ type: 'engine', engineId, reason: 'retokened' });
    for (const [sessionId, reason] of this.#sessions) bus.publish({ type: 'session', sessionId, reason });
  }
}

/** Milliseconds since the epoch, finer than Date.now(): push latencies are measured in fractions of one. */
export const epochMs = (): number => performance.timeOrigin + performance.now();
