/**
 * Socket.IO's cluster adapter (which the sharded Redis adapter extends) sends a broadcast to this
 * node's own sockets only once Redis has answered its SPUBLISH: each local push waits a Redis round
 * trip, and on a Redis that stops answering without closing its connections, every push waits until
 * the liveness probe cuts the connection (api/redis-liveness.ts), 10 s. Here the publish to other
 * nodes leaves first, as before, and this node's sockets get the packet at once; the publish's
 * failure is ignored as the cluster adapter ignores it (the store stays the truth; catch-up polling
 * covers what other nodes missed). Message offsets (connection-state recovery, which the gateway
 * does not use) are not added.
 */
import { Adapter, MessageType, type BroadcastOptions, type ClusterAdapter } from 'socket.io-adapter';

type AdapterFactory = (nsp: any) => Adapter;

/** What ClusterAdapter keeps to itself: fire-and-forget publishing. */
interface Publishing {
  publish(message: { type: MessageType; data: unknown }): void;
}

export function localFirst(make: AdapterFactory): AdapterFactory {
  // Socket.IO calls it with `new` (as the sharded adapter's own factory is): a function, not an arrow.
  return function localFirstAdapter(nsp) {
    const adapter = make(nsp) as ClusterAdapter & Publishing;
    adapter.broadcast = async function broadcast(this: ClusterAdapter & Publishing, packet: any, opts: BroadcastOptions) {
      if (!opts.flags?.local) {
        try {
          // encoded at once (the local send below then sets packet.nsp), as ClusterAdapter encodes it
          this.publish({ type: MessageType.BROADCAST, data: { packet, opts: { rooms: [...opts.rooms], except: [...(opts.except ?? [])], flags: opts.flags } } });
        } catch {
          // a packet that cannot be encoded for Redis still reaches this node's sockets, as in ClusterAdapter
        }
      }
      // Looked up now, not at import: Socket.IO's uWS support replaces it when a gateway attaches (one app.publish per room).
      Adapter.prototype.broadcast.call(this, packet, opts);
    };
    return adapter;
  };
}
