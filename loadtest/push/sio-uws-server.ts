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
import { listenUws, serveSocketIoBaseline } from './baseline-servers.js';

// The fallback is allowed here so that the bench, not a crash, reports it (compare.ts checks native=).
const { uws, native } = loadUws(true);
const app = uws.App();
const io = new Server({ serveClient: false });
io.attachApp(app);
serveSocketIoBaseline(io);
listenUws(app, uws, native);
