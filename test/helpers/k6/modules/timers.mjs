/** k6/timers: each pending timer keeps the iteration open, as on k6's event loop. */
import { hold } from './runtime.mjs';

const releases = new Map();

export function setTimeout(callback, ms, ...args) {
  let handle;
  const release = hold(() => globalThis.clearTimeout(handle));
  handle = globalThis.setTimeout(() => {
    releases.delete(handle);
    release();
    callback(...args);
  }, ms);
  releases.set(handle, release);
  return handle;
}

export function clearTimeout(handle) {
  globalThis.clearTimeout(handle);
  releases.get(handle)?.();
  releases.delete(handle);
}

export function setInterval(callback, ms, ...args) {
  const handle = globalThis.setInterval(callback, ms, ...args);
  releases.set(handle, hold(() => globalThis.clearInterval(handle)));
  return handle;
}

export function clearInterval(handle) {
  globalThis.clearInterval(handle);
  releases.get(handle)?.();
  releases.delete(handle);
}

export default { setTimeout, clearTimeout, setInterval, clearInterval };
