/**
 * The bus carries domain events from the node where a change happened to every other node:
 * cache invalidations for API nodes and pushes for gateway nodes. Two drivers: in-process
 * (single node) and Redis. Delivery is best-effort; a lost message is healed by the REST
 * contract (polls and heartbeats read the store), and a driver that reconnects reports
 * `resync` so caches flush whatever they may have missed.
 */

/** Everything a node may need to hear about. */
export type BusMessage =
  /** an agent's WidgetState changed (version bumped) */
  | { type: 'agent'; integrationId: string; memberId: string; version: number }
  /** integration settings, status or coverage changed */
  | { type: 'integration'; integrationId: string }
  /** a member changed (enabled, removed, department) */
  | { type: 'member'; memberId: string }
  /** a widget session ended (revoked, refreshed away, expired) */
  | { type: 'session'; sessionId: string; reason: string }
  /** the platform switch changed */
  | { type: 'platform'; disabled: boolean }
  /** an engine has new commands or dial requests, or was closed */
  | { type: 'engine'; engineId: string; reason: 'work' | 'closed' }
  /** the driver reconnected: anything may have been missed */
  | { type: 'resync' };

export type BusState = 'up' | 'down';

export interface Bus {
  readonly driver: 'memory' | 'redis';
  /** Deliver to every node, this one included. Never throws. */
  publish(message: BusMessage): void;
  /** Returns an unsubscribe function. */
  subscribe(handler: (message: BusMessage) => void): () => void;
  state(): BusState;
  close(): Promise<void>;
}
