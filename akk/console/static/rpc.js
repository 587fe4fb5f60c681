// The console's one WebSocket: JSON-RPC 2.0 calls and the server's notifications,
// reconnecting with backoff, and telling a refused login from a stopped server.

const MAX_BACKOFF = 10;
const LOGIN_RETRY = 10;

export class RpcError extends Error {
  constructor(error) {
    super(error.message || 'the call failed');
    this.code = error.code;
    this.reason = error.data && error.data.reason;
    this.data = error.data;
  }
}

/** Calls and notifications over `/ui/ws`. `onState(state, seconds)` hears 'connecting',
 *  'open', 'lost' (an open socket closed, or the server cannot be reached) and
 *  'logged_out' (the server answers but refused the upgrade); `seconds` is when the
 *  next try starts. `onNotify(method, params)` hears every notification. */
export class Rpc {
  constructor({ onState, onNotify }) {
    this.onState = onState;
    this.onNotify = onNotify;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.backoff = 1;
    this.timer = null;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    clearTimeout(this.timer);
    this.timer = null;
    const url = new URL('/ui/ws', location.href);
    url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    let opened = false;
    const ws = new WebSocket(url);
    this.ws = ws;
    this.onState('connecting');
    ws.onopen = () => {
      opened = true;
      this.backoff = 1;
      this.onState('open');
    };
    ws.onmessage = (message) => this.receive(message.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.failAll();
      if (this.stopped) return;
      if (opened) this.lost();
      else this.probe();
    };
  }

  /** Close the socket and stop reconnecting (until `start` again). */
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    const ws = this.ws;
    this.ws = null;
    this.failAll();
    if (ws) ws.close();
  }

  call(method, params = {}) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new RpcError({ message: 'not connected to akk serve; it reconnects by itself' }));
    }
    const id = this.nextId++;
    ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  receive(text) {
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (message.id !== undefined && message.id !== null && !message.method) {
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.error) waiter.reject(new RpcError(message.error));
      else waiter.resolve(message.result);
    } else if (typeof message.method === 'string') {
      this.onNotify(message.method, message.params || {});
    }
  }

  failAll() {
    for (const waiter of this.pending.values()) {
      waiter.reject(new RpcError({ message: 'the connection to akk serve closed before the answer came' }));
    }
    this.pending.clear();
  }

  lost() {
    const seconds = this.backoff;
    this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF);
    this.onState('lost', seconds);
    this.retryIn(seconds);
  }

  /** The upgrade failed: a server that answers plain HTTP refused the login; else it is gone. */
  probe() {
    fetch(new URL('/ui/console.css', location.href), { method: 'HEAD', cache: 'no-store', credentials: 'same-origin' })
      .then(() => {
        if (this.stopped) return;
        this.onState('logged_out', LOGIN_RETRY);
        this.retryIn(LOGIN_RETRY);
      })
      .catch(() => {
        if (!this.stopped) this.lost();
      });
  }

  retryIn(seconds) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.start(), seconds * 1000);
  }
}
