/**
 * Baseline of npm run bench:push: raw uWebSockets.js, the floor under our gateway. Every WebSocket
 * that opens subscribes to one topic; a broadcast is one app.publish of the same bytes our gateway
 * sends for a state push (`42["state",{…}]`). Started by the bench with the probe preloaded;
 * prints `listening <port> native=<bool>`. Usage: node --import tsx uws-server.ts (PORT env).
 */
import { loadUws } from '../../gateway/uws.js';
import { listenUws } from './baseline-servers.js';
import { onControl, paced, type BroadcastResult } from './control.js';

const TOPIC = 'agent';
// The fallback is allowed here so that the bench, not a crash, reports it (compare.ts checks native=).
const { uws, native } = loadUws(true);
const app = uws.App();
let open = 0;

app.ws('/*', {
  compression: uws.DISABLED,
  maxPayloadLength: 64 * 1024,
  // the same keep-alive budget as Socket.IO's (ping every 25 s): uWS pings natively on idle sockets
  idleTimeout: 120,
  maxBackpressure: 4 * 1024 * 1024,
  open: (ws) => {
    open += 1;
    ws.subscribe(TOPIC);
  },
  close: () => void (open -= 1),
});

onControl(async (request) => {
  if (request.op === 'broadcast') {
    const payload = String(request.payload);
    const members = app.numSubscribers(TOPIC);
    const { pushes, ms } = await paced(Number(request.rate), Number(request.seconds), () => app.publish(TOPIC, payload, false));
    return { pushes, members, ms } satisfies BroadcastResult;
  }
  if (request.op === 'stats') return { open, subscribers: app.numSubscribers(TOPIC) };
  throw new Error(`unknown op ${String(request.op)}`);
});

listenUws(app, uws, native);
