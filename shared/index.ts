/** The contract as code: import from here in api, gateway, sdk and window. */
export * from './errors.js';
export * from './limits.js';
export * from './prefixes.js';
export * from './origin.js';
export type * from './types.js';
