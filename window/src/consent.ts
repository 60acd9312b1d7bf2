/**
 * Consent to carry an agent's calls in this browser (docs/window.md, "Consent"). The microphone
 * permission belongs to the service's origin, which every integration shares: without this, a
 * window opened by anyone holding a launch ticket (any integrator's page, a link, a redirect) would
 * pair and carry that agent's calls with this browser's microphone, nobody having clicked
 * anything. The first time this browser pairs for an integration's agent, the window asks; a yes is
 * kept in this origin's localStorage, which no integrator's page can write.
 */
import type { Paired } from './api.js';

const TRUSTED_KEY = 'c2c.window.agents';
/** agents kept (the newest first): a shared desk sees a few, one agent's own browser one */
const MAX_TRUSTED = 20;

const agentKey = (paired: Paired) => `${paired.integration_id} ${paired.agent.identifier}`;

function read(storage: Storage | null): string[] {
  try {
    const list = JSON.parse(storage?.getItem(TRUSTED_KEY) ?? '[]') as unknown;
    return Array.isArray(list) ? list.filter((entry): entry is string => typeof entry === 'string') : [];
  } catch {
    return [];
  }
}

/** Whether this browser's user said yes to carrying this agent's calls. */
export function consented(storage: Storage | null, paired: Paired): boolean {
  return read(storage).includes(agentKey(paired));
}

/** Keeps the yes (storage disabled: the window asks again next time). */
export function keepConsent(storage: Storage | null, paired: Paired): void {
  const key = agentKey(paired);
  try {
    storage?.setItem(TRUSTED_KEY, JSON.stringify([key, ...read(storage).filter((entry) => entry !== key)].slice(0, MAX_TRUSTED)));
  } catch {
    // storage full or disabled
  }
}
