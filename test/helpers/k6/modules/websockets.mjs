/**
 * k6/websockets: the browser's WebSocket API plus k6's params (headers), on the `ws` library. An
 * open socket keeps the iteration open until it closes.
 */
import { createRequire } from 'node:module';
import { hold } from './runtime.mjs';

const Ws = createRequire(import.meta.url)('ws');

export class WebSocket {
  constructor(url, protocols, params = {}) {
    this.url = url;
    this.onopen = null;
    this.onmessage = null;
    this.onerror = null;
    this.onclose = null;
    const release = hold(() => this.socket.terminate());
    this.socket = new Ws(url, protocols ?? undefined, { headers: params.headers ?? {}, perMessageDeflate: false });
    this.socket.on('open', () => this.onopen?.({ type: 'open' }));
    this.socket.on('message', (data) => this.onmessage?.({ type: 'message', data: data.toString() }));
    this.socket.on('error', (error) => this.onerror?.({ type: 'error', error: String(error.message) }));
    this.socket.on('close', (code, reason) => {
      release();
      this.onclose?.({ type: 'close', code, reason: reason.toString() });
    });
  }

  get readyState() {
    return this.socket.readyState;
  }

  /** k6 throws unless the socket is open (ws would drop the message silently once closed). */
  send(data) {
    if (this.socket.readyState !== 1) throw new Error(`InvalidStateError: send() on a WebSocket that is ${['connecting', 'open', 'closing', 'closed'][this.socket.readyState]}`);
    this.socket.send(data);
  }

  /** k6's close() of a socket still connecting stalls the virtual user: a script must not do it. */
  close(code) {
    if (this.socket.readyState === 0) throw new Error('close() on a WebSocket still connecting: under k6 it would stall the virtual user');
    this.socket.close(code);
  }
}

export default { WebSocket };
