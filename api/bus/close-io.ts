/** Closes a socket.io server whether or not a gateway ever attached it to a uWS app. */
import type { Server } from 'socket.io';

export function closeIo(io: Server): void {
  io.disconnectSockets(true);
  // io.close() reaches for the engine, which only exists once the server was attached.
  if ((io as unknown as { engine?: unknown }).engine) void io.close();
}
