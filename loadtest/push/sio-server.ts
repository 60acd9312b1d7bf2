/**
 * Baseline of npm run bench:push: Socket.IO 4.8 on Node's own http server (`new Server(httpServer)`,
 * default options), the usual way to run Socket.IO. Every socket joins one room; a broadcast is
 * io.to(room).emit('state', the same WidgetState our gateway pushes). Started by the bench with the
 * probe preloaded; prints `listening <port>`. Usage: node --import tsx sio-server.ts (PORT env).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from 'socket.io';
import { onControl, paced, type BroadcastResult } from './control.js';

const ROOM = 'agent';
const http = createServer();
const io = new Server(http, { serveClient: false });
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

http.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`listening ${(http.address() as AddressInfo).port}`);
});
