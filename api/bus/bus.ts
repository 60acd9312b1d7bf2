/**
 * The bus carries domain events from the node where a change happened to every node, and socket
 * events to whichever nodes hold the sockets of a room. Two drivers: in-process (one node) and
 * Redis (pub/sub for node messages; @socket.io/redis-adapter's sharded adapter, dynamic
 * subscriptions, for rooms, so a push for one agent reaches only the nodes holding that agent).
 * Delivery is best-effort: a lost message is healed by the REST contract (polls and heartbeats
 * read the store), and a driver that reconnects reports `resync` so caches flush.
 */
import type { Server } from 'socket.io';
import type { EngineWork } from '../../shared/events.js';

/** Everything a node may need to hear about. */
export type BusMessage =
  /** an agent's WidgetState changed (version bumped); `at`: when the change began to be made (ms since the epoch), for the push latency */
  | { type: 'agent'; integrationId: string; memberId: string; version: number; at?: number }
  /** integration settings, status or coverage changed */
  | { type: 'integration'; integrationId: string }
  /** a member changed (enabled, removed, department) */
  | { type: 'member'; memberId: string }
  /** a widget session ended (revoked, refreshed away, expired) */
  | { type: 'session'; sessionId: string; reason: string }
  /** the platform switch changed */
  | { type: 'platform'; disabled: boolean }
  /**
   * an engine has new commands or dial requests (`work`: what the change's transaction already
   * handed over, for the node that made it to push as is), or was closed
   */
  | { type: 'engine'; engineId: string; reason: 'work'; work?: EngineWork; at?: number }
  /** `why`: the engine's close_reason (`replaced`, `integration_revoked`, the window's own); absent from nodes that predate it */
  | { type: 'engine'; engineId: string; reason: 'closed'; why?: string }
  /** the engine's pairing was asked again and gave it a new token: the old one stops (caches drop it, its sockets are re-checked) */
  | { type: 'engine'; engineId: string; reason: 'retokened' }
  /** a node's connection to Redis came back (this node's or another's): anything may have been missed, by it or from it */
  | { type: 'resync' }
  /**
   * an operation on a simulated call whose leg this node does not hold: the node whose simulator
   * holds it carries it out (api/providers/simulated/simulator.ts)
   */
  | { type: 'simulator'; op: 'hangup' | 'answer' | 'digits'; callSid: string; digits?: string };

/**
 * Messages only the node that published them acts on: engine work is pushed by that node's pusher
 * to the engine's room (the adapter carries it to whichever node holds the socket), and no other
 * node listens for it, so drivers need not send it across.
 */
export const staysOnNode = (message: BusMessage): boolean => message.type === 'engine' && message.reason === 'work';

export type BusState = 'up' | 'down';

/** How a message reached this node: `local` when this node published it. */
export interface Delivery {
  local: boolean;
}

export type BusHandler = (message: BusMessage, delivery: Delivery) => void;

export interface Bus {
  readonly driver: 'memory' | 'redis';
  /** Deliver to every node (unless it `staysOnNode`), this one included (at once, with local: true). Never throws. */
  publish(message: BusMessage): void;
  /** Returns an unsubscribe function. */
  subscribe(handler: BusHandler): () => void;
  /**
   * Tells this node's handlers `resync` (and no other node's): something other than the bus found
   * that messages may have been lost to this node (api/domain/push-debt.ts).
   */
  resyncHere(): void;
  /**
   * The socket.io server whose adapter fans room events out across nodes. Gateway nodes attach
   * it to their uWS app; every node emits to rooms through it (pushes of state and work).
   */
  readonly io: Server;
  /** false only when no socket in the room can be reached (one-node driver, room empty here; Redis down, room not here) */
  mayHaveListeners(room: string): boolean;
  /**
   * Resolves once the rooms this node's sockets joined so far receive what is pushed to them, and
   * the bus messages of the changes made before have arrived here (dropping what they make stale in
   * this node's caches), so that a snapshot read afterwards cannot miss a change pushed in between.
   * At once while the bus is down: the gateway's catch-up covers sockets then (gateway/catch-up.ts).
   */
  roomsJoined(): Promise<void>;
  /** Pushes other nodes made that reached this node through Redis, for its sockets (none in one process). */
  relayedCount(): number;
  state(): BusState;
  close(): Promise<void>;
}
