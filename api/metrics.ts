/**
 * Prometheus metrics (prom-client), served at /metrics by the API and the gateway: connected
 * sockets by kind, refused handshakes by code, connections closed for not reading, sockets ended
 * on a node cut off from Redis and the database, pushes (a node's own and those relayed from other
 * nodes), acks, redeliveries, push latency, the bus's state and the changes a node cut off from
 * it counted in the store for the others (and those others heard of), the statements that failed because the
 * database was out of reach, hangups the voice provider did not confirm, and calls settled from the
 * provider's record because their final callback never came.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Bus } from './bus/index.js';
import { epochMs } from './domain/changes.js';
import type { Reaper } from './domain/reaper.js';
import type { Providers } from './providers/index.js';
import type { Db } from './store/index.js';

/** A counter a part keeps itself (the store's failures, the bus's relays): collected as its rise since the last scrape. */
function keptCount(registry: Registry, name: string, help: string, read: () => number): void {
  let seen = 0;
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      const count = read();
      this.inc(count - seen);
      seen = count;
    },
  });
}

export function createMetrics(bus: Bus, db: Db, providers: Providers, reaper: Pick<Reaper, 'settledByRecords'>) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'c2c_' });
  const sockets = new Gauge({ name: 'c2c_sockets_connected', help: 'Connected sockets on this node', labelNames: ['kind'] as const, registers: [registry] });
  const pushes = new Counter({
    name: 'c2c_pushes_total',
    help: "Pushes this node sent for the changes it made (state to an agent's widgets, work to an engine), to their room on every node (one per room, however many sockets it reaches, none included)",
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const pushLatency = new Histogram({
    name: 'c2c_push_latency_seconds',
    help: "From a change beginning to be made (its transaction sent to the store) to its push leaving this node: the store's time, the state's read or the work's hand-over included",
    labelNames: ['kind'] as const,
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  });
  const acks = new Counter({ name: 'c2c_command_acks_total', help: 'Commands acked by engines for the first time, by how the ack came (heartbeat, or the socket ack event)', labelNames: ['via'] as const, registers: [registry] });
  const redeliveries = new Counter({ name: 'c2c_command_redeliveries_total', help: 'Commands handed to an engine again, no ack having come for an earlier hand-over: in a reconnect snapshot, a socket heartbeat once the ack is overdue, or any REST heartbeat (a window on the polling fallback is handed every unacked command)', registers: [registry] });
  const socketRefusals = new Counter({
    name: 'c2c_socket_refusals_total',
    help: 'Socket handshakes refused, by error code (a surge of unauthorized or rate_limited is a client looping or a flood)',
    labelNames: ['code'] as const,
    registers: [registry],
  });
  const unreadOverflows = new Counter({
    name: 'c2c_socket_unread_overflows_total',
    help: 'Connections closed for leaving over 1000 packets unread (a long-polling client that never fetches its answers) or a WebSocket over 256 KB unsent (a reader that stopped): gateway/guard.ts',
    registers: [registry],
  });
  const isolatedEndings = new Counter({
    name: 'c2c_socket_isolated_endings_total',
    help: 'Sockets a gateway ended because it was cut off from both Redis and the database (for ISOLATED_FOR_MS: gateway/isolation.ts); their clients poll, and reconnect once a node can serve them',
    registers: [registry],
  });
  new Gauge({
    name: 'c2c_bus_up',
    help: '1 while the bus (and its Redis connections) is up',
    labelNames: ['driver'] as const,
    registers: [registry],
    collect() {
      this.set({ driver: bus.driver }, bus.state() === 'up' ? 1 : 0);
    },
  });
  const missedChanges = new Counter({
    name: 'c2c_bus_missed_changes_total',
    help: "Changes this node announced while cut off from Redis, counted in the store for the nodes that can reach it (event=counted: a rise while other nodes' c2c_bus_up is 1 means this node alone cannot reach Redis), and the moved counts this node read, each followed by reading everything again (event=heard): api/domain/push-debt.ts",
    labelNames: ['event'] as const,
    registers: [registry],
  });
  keptCount(registry, 'c2c_pushes_relayed_total', "Pushes made on other nodes that reached this node through Redis for its sockets (a gateway's share of the fan-out; c2c_pushes_total counts a node's own)", () => bus.relayedCount());
  let hangupFailuresSeen: Record<string, number> = {};
  new Counter({
    name: 'c2c_provider_hangup_failures_total',
    help: "Hangups the voice provider could not be asked for or did not confirm (Twilio down, refusing the credentials, rate-limiting, silent past TWILIO_TIMEOUT_MS): a caller's, answered 502 hangup_uncertain and tried again by that caller, and the reaper's, of silent windows' calls (tried again) and of calls it ended overdue (a safeguard, not tried again)",
    labelNames: ['provider'] as const,
    registers: [registry],
    collect() {
      const now: Record<string, number> = {};
      for (const provider of new Set([providers.simulator, providers.configured, providers.byName('twilio')])) now[provider.name] = provider.hangupFailures;
      for (const [provider, count] of Object.entries(now)) this.inc({ provider }, count - (hangupFailuresSeen[provider] ?? 0));
      hangupFailuresSeen = now;
    },
  });
  keptCount(
    registry,
    'c2c_calls_settled_by_provider_record_total',
    "Live calls this node's reaper ended from the voice provider's own record: their final status callback had not come (a steady rise means callbacks are being lost: answered with errors, or stopped on their way)",
    () => reaper.settledByRecords(),
  );
  keptCount(registry, 'c2c_store_unavailable_total', 'Statements that failed because the database was out of reach or stuck (each answered 503)', () => db.unavailableCount());
  return {
    registry,
    sockets,
    pushes,
    acks,
    redeliveries,
    socketRefusals,
    unreadOverflows,
    isolatedEndings,
    missedChanges,
    /** A push left this node: `since`, when the change it carries began to be made (ms since the epoch). */
    observePush(kind: 'state' | 'work', since: number) {
      pushes.inc({ kind });
      pushLatency.observe({ kind }, Math.max(0, epochMs() - since) / 1000);
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
