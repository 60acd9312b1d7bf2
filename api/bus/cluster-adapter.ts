/**
 * Socket.IO's sharded Redis adapter as the bus uses it (redis.ts), changed in three ways:
 *
 * - Local first. The cluster adapter sends a broadcast to this node's own sockets only once Redis
 *   has answered its SPUBLISH: each local push waits a Redis round trip, and on a Redis that stops
 *   answering without closing its connections, every push waits until the liveness probe cuts the
 *   connection (api/redis-liveness.ts), 10 s. Here the publish to other nodes leaves first, as
 *   before, and this node's sockets get the packet at once; the publish's failure is ignored as the
 *   cluster adapter ignores it (the store stays the truth; catch-up polling covers what other nodes
 *   missed). Message offsets (connection-state recovery, which the gateway does not use) are not added.
 * - Relays counted: the broadcasts other nodes send here (a gateway's share of the fan-out, /metrics).
 * - Stray messages ignored. The adapter trusts what arrives on its channels: a message of another
 *   shape (a node of another version, anything that can SPUBLISH) threw inside ioredis's data
 *   handler, which stops the process, on every node at once.
 */
import { Adapter, MessageType, type BroadcastOptions, type ClusterAdapter } from 'socket.io-adapter';

type AdapterFactory = (nsp: any) => Adapter;

/** socket.io-adapter's own broadcast, before a gateway's attachApp replaces it (this module loads first). */
const inMemoryBroadcast = Adapter.prototype.broadcast;

/** What ClusterAdapter keeps to itself: fire-and-forget publishing, and what arrives from other nodes. */
interface Publishing {
  publish(message: { type: MessageType; data: unknown }): void;
  onMessage(message: { uid?: string; nsp?: string; type: MessageType }, offset?: string): unknown;
  onResponse(response: unknown): unknown;
}

/** Runs an adapter handler on a message from Redis; what it throws or rejects is dropped with the message. */
function guarded<A extends unknown[]>(handle: (...args: A) => unknown): (...args: A) => void {
  return (...args) => {
    try {
      const result = handle(...args);
      if (result instanceof Promise) result.catch(() => {});
    } catch {
      // a message this adapter cannot read: dropped, as a stray one on the bus channel is (redis.ts)
    }
  };
}

export function clusterAdapter(make: AdapterFactory, onRelayed: () => void = () => {}): AdapterFactory {
  // Socket.IO calls it with `new` (as the sharded adapter's own factory is): a function, not an arrow.
  return function c2cClusterAdapter(nsp) {
    const adapter = make(nsp) as ClusterAdapter & Publishing;
    // this adapter's id in the cluster (ClusterAdapter keeps it protected)
    const { uid } = adapter as unknown as { uid: string };
    adapter.broadcast = async function broadcast(this: ClusterAdapter & Publishing, packet: any, opts: BroadcastOptions) {
      if (!opts.flags?.local) {
        try {
          // encoded at once (the local send below then sets packet.nsp), as ClusterAdapter encodes it
          this.publish({ type: MessageType.BROADCAST, data: { packet, opts: { rooms: [...opts.rooms], except: [...(opts.except ?? [])], flags: opts.flags } } });
        } catch {
          // a packet that cannot be encoded for Redis still reaches this node's sockets, as in ClusterAdapter
        }
      }
      // On a gateway, looked up now: Socket.IO's uWS support replaces it when the gateway attaches
      // (one app.publish per room, on that app). The replacement is global and publishes on the
      // app it was made for, so a server not attached to it (an API node's, in a process that also
      // runs a gateway: tests) keeps the in-memory broadcast, which reaches its own sockets only.
      (this.nsp.server.engine ? Adapter.prototype.broadcast : inMemoryBroadcast).call(this, packet, opts);
    };
    const onMessage = guarded(adapter.onMessage.bind(adapter));
    adapter.onMessage = (message, offset) => {
      // a node's own messages come back to it too, and are ignored there, as are other namespaces'
      if (message?.type === MessageType.BROADCAST && message.uid !== uid && message.nsp === nsp.name) onRelayed();
      onMessage(message, offset);
    };
    adapter.onResponse = guarded(adapter.onResponse.bind(adapter));
    return adapter;
  };
}
