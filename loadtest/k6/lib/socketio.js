/**
 * A Socket.IO v4 client for k6, which has none: the protocol (Engine.IO 4 over a WebSocket, JSON
 * packets, the main namespace) spoken over k6/websockets, as loadtest/push/wire-client.ts speaks it
 * for the Node bench. https://socket.io/docs/v4/socket-io-protocol/
 *
 * The server opens with `0{…}`; the client joins the main namespace with `40{auth}`; the server
 * answers `40{sid}` or refuses with `44{message, data}` (data is the service's {code, final,
 * message}); `42[event, …args]` is an event, `42<id>[…]` one that wants an ack, answered by
 * `43<id>[…]`; `2` is the server's ping, answered with `3`.
 */
import { WebSocket } from 'k6/websockets';
import { setTimeout, clearTimeout } from 'k6/timers';

/** The WebSocket URL of a `realtime` object from a session or the WidgetState. */
export function socketUrl(realtime) {
  const base = realtime.url.replace(/^http/, 'ws').replace(/\/$/, '');
  const path = realtime.path.replace(/\/$/, '');
  return `${base}${path}/?EIO=4&transport=websocket`;
}

/**
 * Connects with `auth: {token}` from `origin` (the gateway checks it as a browser would send it).
 * Resolves with the socket once the namespace is joined; rejects with the refusal's data
 * ({code, final, message}) or a transport error.
 */
export function connect(realtime, token, origin, timeoutMs) {
  return new Promise((resolve, reject) => {
    const socket = new SocketIo(socketUrl(realtime), token, origin);
    const timer = setTimeout(() => {
      socket.close();
      reject({ code: 'timeout', message: `no answer to the handshake in ${timeoutMs} ms` });
    }, timeoutMs || 10000);
    socket.onConnect = () => {
      clearTimeout(timer);
      resolve(socket);
    };
    socket.onRefused = (data) => {
      clearTimeout(timer);
      socket.close();
      reject(data);
    };
  });
}

export class SocketIo {
  constructor(url, token, origin) {
    this.connected = false;
    this.handlers = {};
    /** events that came before anyone listened (a snapshot right behind the connect): kept for the first listener */
    this.unheard = {};
    this.acks = {};
    this.nextAck = 0;
    this.onConnect = null;
    this.onRefused = null;
    this.token = token;
    this.ws = new WebSocket(url, null, { headers: { Origin: origin } });
    this.ws.onmessage = (event) => this.packet(String(event.data));
    this.ws.onerror = (event) => {
      if (!this.connected && this.onRefused) this.onRefused({ code: 'transport_error', message: String((event && event.error) || 'WebSocket error') });
    };
    this.ws.onclose = () => {
      const was = this.connected;
      this.connected = false;
      if (was) this.fire('disconnect', 'transport close');
    };
  }

  /** Listens to a server event (`state`, `work`, `ended`) or to `disconnect`. */
  on(event, handler) {
    (this.handlers[event] = this.handlers[event] || []).push(handler);
    const unheard = this.unheard[event] || [];
    delete this.unheard[event];
    for (const [value, reply] of unheard) handler(value, reply);
    return this;
  }

  /** Sends an event; with `reply`, the server's answer comes back to it (Socket.IO's ack). */
  emit(event, payload, reply) {
    let id = '';
    if (reply) {
      id = String(this.nextAck++);
      this.acks[id] = reply;
    }
    this.ws.send(`42${id}${JSON.stringify([event, payload])}`);
  }

  /** emit() that resolves with the ack, or rejects after timeoutMs. */
  request(event, payload, timeoutMs) {
    return new Promise((resolve, reject) => {
      let id;
      const timer = setTimeout(() => {
        delete this.acks[id];
        reject(new Error(`no ack to ${event} in ${timeoutMs} ms`));
      }, timeoutMs);
      id = String(this.nextAck);
      this.emit(event, payload, (answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
    });
  }

  close() {
    this.connected = false;
    // k6 cannot close a WebSocket still connecting (its close() waits on a writer that starts only
    // once connected, and stalls the virtual user): it closes once open.
    if (this.ws.readyState === 0) {
      this.ws.onopen = () => this.ws.close();
      return;
    }
    if (this.ws.readyState === 1) this.ws.send('41');
    this.ws.close();
  }

  fire(event, value) {
    for (const handler of this.handlers[event] || []) handler(value);
  }

  /** k6 throws on send() to a socket not open: a ping or the server's open packet may arrive as it closes. */
  send(text) {
    if (this.ws.readyState === 1) this.ws.send(text);
  }

  packet(text) {
    if (text === '2') return this.send('3');
    if (text[0] === '0') return this.send(`40${JSON.stringify({ token: this.token })}`);
    if (text[0] === '4') return this.message(text.slice(1));
  }

  message(text) {
    const type = text[0];
    let at = 1;
    while (at < text.length && text[at] >= '0' && text[at] <= '9') at += 1;
    const id = text.slice(1, at);
    const rest = text.slice(at);
    if (type === '0') {
      this.connected = true;
      if (this.onConnect) this.onConnect(JSON.parse(rest));
    } else if (type === '4') {
      const refusal = JSON.parse(rest);
      if (this.onRefused) this.onRefused(refusal.data || { code: 'refused', message: refusal.message });
    } else if (type === '1') {
      this.connected = false;
      this.fire('disconnect', 'io server disconnect');
    } else if (type === '2') {
      const [event, ...args] = JSON.parse(rest);
      const reply = id === '' ? undefined : (answer) => this.send(`43${id}${JSON.stringify([answer])}`);
      const handlers = this.handlers[event] || [];
      if (handlers.length === 0) (this.unheard[event] = this.unheard[event] || []).push([args[0], reply]);
      for (const handler of handlers) handler(args[0], reply);
    } else if (type === '3') {
      const callback = this.acks[id];
      delete this.acks[id];
      if (callback) callback(JSON.parse(rest)[0]);
    }
  }
}
