/**
 * Loading uWebSockets.js. The republished build we install falls back silently to a slow
 * JavaScript implementation when its native binary does not load; the gateway refuses to start on
 * that fallback unless C2C_ALLOW_UWS_FALLBACK says otherwise (DESIGN, install notes).
 */
import { createRequire } from 'node:module';
import type * as Uws from 'uWebSockets.js';
import { ConfigError } from '../api/config.js';

export type UwsModule = typeof Uws;

const require = createRequire(import.meta.url);

/** True when the module's App is the native binding, not the JavaScript fallback. */
export function isNativeUws(uws: UwsModule): boolean {
  return typeof uws.App === 'function' && Function.prototype.toString.call(uws.App).includes('[native code]');
}

/** A ConfigError: the operator installs a native build or allows the fallback (printed as one line). */
export class UwsFallbackError extends ConfigError {}

export function loadUws(allowFallback: boolean): { uws: UwsModule; native: boolean } {
  const uws = require('uWebSockets.js') as UwsModule;
  const native = isNativeUws(uws);
  if (!native && !allowFallback) {
    throw new UwsFallbackError(
      'uWebSockets.js is running its slow JavaScript fallback (the native binary did not load on this platform). ' +
        'Install a build for this Node.js and glibc (see README, "Production install"), or set C2C_ALLOW_UWS_FALLBACK=1 to run slowly anyway.',
    );
  }
  return { uws, native };
}
