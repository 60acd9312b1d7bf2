/**
 * A lean Socket.IO client for the bench's load: the Socket.IO v4 protocol (Engine.IO 4, WebSocket
 * transport only, JSON packets) spoken over a plain `ws` WebSocket, the library the raw uWS
 * baseline's clients use. It holds no Manager, no reconnection logic, no transport upgrade and no
 * timers but those of a pending connect and of pending acks, so client processes sharing the
 * machine with the servers take less of it (in the reconnect storm, about half the CPU of
 * socket.io-client). It does not watch for ping timeouts: the bench's servers close their sockets
 * when they stop. `BENCH_CLIENT=socket.io-client` switches back to the real client; this class
 * offers the subset of socket.io-client's `Socket` that the bench uses.
 *
 * Protocol (https://socket.io/docs/v4/socket-io-protocol/): the server opens with `0{…}`; the
 * client connects the main namespace with `40{auth}`; the server answers `40{sid}` or
 * `44{message, data}`; `42[event, …args]` is an event, `42<id>[…]` one that wants an ack, answered
 * by `43<id>[…]`; `2` is the server's ping, answered by `3`; `41` ends the namespace, `1` the socket.
 */
import WebSocket from 'ws';

type Handler = (...args: any[]) => void;
type AckCallback = (error: Error | null, reply?: any) => void;

export interface WireOptions {
  auth?: Record<string, unknown>;
  origin?: string;
  /** how long a connection attempt may take before it fails with connect_error 'timeout' */
  timeoutMs: number;
}

export class WireSocket {
  connected = false;
  #ws?: WebSocket;
  #connectTimer?: NodeJS.Timeout;
  readonly #handlers = new Map<string, Handler[]>();
  readonly #acks = new Map<number, { callback: AckCallback; timer: NodeJS.Timeout }>();
  #nextAck = 0;

  constructor(
    readonly url: string,
    readonly options: WireOptions,
  ) {}

  on(event: string, handler: Handler): this {
    const list = this.#handlers.get(event);
    if (list) list.push(handler);
    else this.#handlers.set(event, [handler]);
    return this;
  }

  removeAllListeners(): this {
    this.#handlers.clear();
    return this;
  }

  /** Opens a new WebSocket and connects the main namespace (a previous one is dropped). */
  connect(): this {
    if (this.connected) this.#closed('io client disconnect');
    this.#drop();
    const endpoint = new URL('/socket.io/', this.url);
    endpoint.protocol = endpoint.protocol === 'https:' ? 'wss:' : 'ws:';
    endpoint.search = 'EIO=4&transport=websocket';
    const ws = new WebSocket(endpoint, { perMessageDeflate: false, headers: this.options.origin ? { origin: this.options.origin } : {} });
    this.#ws = ws;
    this.#connectTimer = setTimeout(() => this.#refuse(new Error('timeout')), this.options.timeoutMs);
    ws.on('message', (data: WebSocket.RawData) => this.#ws === ws && this.#packet(data.toString()));
    ws.on('error', (error: Error) => this.#ws === ws && !this.connected && this.#refuse(error));
    ws.on('close', () => this.#ws === ws && this.#closed('transport close'));
    return this;
  }

  /** Leaves the namespace (`41`) and closes the WebSocket cleanly. */
  disconnect(): this {
    const ws = this.#ws;
    if (ws?.readyState === WebSocket.OPEN) {
      this.#ws = undefined;
      ws.send('41');
      ws.close();
    }
    this.#closed('io client disconnect');
    return this;
  }

  /** socket.io-client's `socket.timeout(ms).emit(event, payload, (error, reply) => …)`. */
  timeout(ms: number): { emit: (event: string, payload: unknown, callback: AckCallback) => void } {
    return { emit: (event, payload, callback) => this.#emit(event, payload, callback, ms) };
  }

  #emit(event: string, payload: unknown, callback: AckCallback, timeoutMs: number): void {
    const ws = this.#ws;
    if (!this.connected || ws?.readyState !== WebSocket.OPEN) return callback(new Error('not connected'));
    const id = this.#nextAck++;
    const timer = setTimeout(() => {
      this.#acks.delete(id);
      callback(new Error('operation has timed out'));
    }, timeoutMs);
    this.#acks.set(id, { callback, timer });
    ws.send(`42${id}${JSON.stringify([event, payload])}`);
  }

  #packet(text: string): void {
    switch (text[0]) {
      case '0':
        this.#ws!.send(this.options.auth ? `40${JSON.stringify(this.options.auth)}` : '40');
        return;
      case '2':
        this.#ws!.send('3');
        return;
      case '1':
        this.#closed('transport close');
        return;
      case '4':
        return this.#socketPacket(text.slice(1));
    }
  }

  #socketPacket(packet: string): void {
    switch (packet[0]) {
      case '0':
        clearTimeout(this.#connectTimer);
        this.#connectTimer = undefined;
        this.connected = true;
        this.#fire('connect');
        return;
      case '4': {
        const refusal = JSON.parse(packet.slice(1)) as { message?: string; data?: unknown };
        this.#refuse(Object.assign(new Error(refusal.message ?? 'connect_error'), { data: refusal.data }));
        return;
      }
      case '1':
        this.#closed('io server disconnect');
        return;
      case '2': {
        const [event, ...args] = JSON.parse(packet.slice(packet.indexOf('['))) as [string, ...unknown[]];
        this.#fire(event, ...args);
        return;
      }
      case '3': {
        const bracket = packet.indexOf('[');
        const id = Number(packet.slice(1, bracket));
        const pending = this.#acks.get(id);
        if (!pending) return;
        this.#acks.delete(id);
        clearTimeout(pending.timer);
        pending.callback(null, (JSON.parse(packet.slice(bracket)) as unknown[])[0]);
        return;
      }
    }
  }

  #fire(event: string, ...args: unknown[]): void {
    for (const handler of this.#handlers.get(event) ?? []) handler(...args);
  }

  /** A connection attempt failed: connect_error, and the WebSocket is closed. */
  #refuse(error: Error): void {
    this.#drop();
    this.#fire('connect_error', error);
  }

  /** The WebSocket closed: a connected socket is disconnected; a pending attempt fails. */
  #closed(reason: string): void {
    const was = this.connected;
    const attempting = this.#connectTimer !== undefined;
    this.#drop();
    if (was) this.#fire('disconnect', reason);
    else if (attempting && reason !== 'io client disconnect') this.#fire('connect_error', new Error(reason));
  }

  /** Forgets the WebSocket and fails the acks still pending on it, as socket.io-client does on disconnect. */
  #drop(): void {
    clearTimeout(this.#connectTimer);
    this.#connectTimer = undefined;
    const ws = this.#ws;
    this.#ws = undefined;
    this.connected = false;
    if (ws && ws.readyState !== WebSocket.CLOSED) ws.terminate();
    for (const [id, pending] of this.#acks) {
      this.#acks.delete(id);
      clearTimeout(pending.timer);
      pending.callback(new Error('socket has been disconnected'));
    }
  }
}
