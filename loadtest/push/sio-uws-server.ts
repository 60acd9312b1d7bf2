/**
 * Baseline of npm run bench:push: Socket.IO 4.8 attached to uWebSockets.js (`io.attachApp`), as our
 * gateway runs it, with nothing of ours: no authentication, no snapshot, no Redis adapter, no
 * index. It is the floor the gateway's stack sets, between raw uWS and our gateway: what is left
 * above it is ours. Every socket joins one room; a broadcast is io.to(room).emit('state', the same
 * WidgetState our gateway pushes), which Socket.IO's uWS patch turns into one app.publish. Started
 * by the bench with the probe preloaded; prints `listening <port> native=<bool>`.
 * Usage: node --import tsx sio-uws-server.ts (PORT env).
 */
import { Server } from 'socket.io';
import { loadUws } from '../../gateway/uws.js';
import { onControl, paced, type BroadcastResult } from './control.js';

const ROOM = 'agent';
// The fallback is allowed here so that the bench, not a crash, reports it (compare.ts checks native=).
const { uws, native } = loadUws(true);
const app = uws.App();
const io = new Server({ serveClient: false });
io.attachApp(app);
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

app.listen('127.0.0.1', Number(process.env.PORT ?? 0), (socket) => {
  if (!socket) {
    console.error('cannot listen');
    process.exit(1);
  }
  console.log(`listening ${uws.us_socket_local_port(socket)} native=${native}`);
});
