#!/usr/bin/env node
// The c2c command: runs the TypeScript sources through tsx, so `npm ci && npm start` needs no build step.
import { register } from 'tsx/esm/api';

register();
await import('../api/cli/main.ts');
