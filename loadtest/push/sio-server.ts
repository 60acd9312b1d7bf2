/**
 * Baseline of npm run bench:push: Socket.IO 4.8 on Node's own http server (`new Server(httpServer)`,
 * default options), the usual way to run Socket.IO. Every socket joins one room; a broadcast is
 * io.to(room).emit('state', the same WidgetState our gateway pushes). Started by the bench with the
 * probe preloaded; prints `listening <port>`. Usage: node --import tsx sio-server.ts (PORT env).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from 'socket.io';
import { serveSocketIoBaseline } from './baseline-servers.js';

const http = createServer();
serveSocketIoBaseline(new Server(http, { serveClient: false }));
http.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`listening ${(http.address() as AddressInfo).port}`);
});
