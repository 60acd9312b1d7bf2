/**
 * What the baseline servers of npm run bench:push share: the Socket.IO baselines' room and control
 * handler (on Node http or on uWS, the same broadcast), and the uWS baselines' listening line.
 */
import type { Server } from 'socket.io';
import type { TemplatedApp } from 'uWebSockets.js';
import type { UwsModule } from '../../gateway/uws.js';
import { onControl, paced, type BroadcastResult } from './control.js';

const ROOM = 'agent';

/** Every socket joins one room; a broadcast is io.to(room).emit('state', the WidgetState our gateway pushes). */
export function serveSocketIoBaseline(io: Server): void {
  io.on('connection', (socket) => void socket.join(ROOM));
  onControl(async (request) => {
    if (request.op === 'broadcast') {
      const state = JSON.parse(String(request.state)) as unknown;
      const members = io.sockets.adapter.rooms.get(ROOM)?.size ?? 0;
      const { pushes, ms } = await paced(Number(request.rate), Number(request.seconds), () => io.to(ROOM).emit('state', state));
      return { pushes, members, ms } satisfies BroadcastResult;
    }
    if (request.op === 'stats') return { open: io.engine.clientsCount };
    throw new Error(`unknown op ${String(request.op)}`);
  });
}

/** Listens on PORT and prints `listening <port> native=<bool>`, which the bench waits for and checks. */
export function listenUws(app: TemplatedApp, uws: UwsModule, native: boolean): void {
  app.listen('127.0.0.1', Number(process.env.PORT ?? 0), (socket) => {
    if (!socket) {
      console.error('cannot listen');
      process.exit(1);
    }
    console.log(`listening ${uws.us_socket_local_port(socket)} native=${native}`);
  });
}
