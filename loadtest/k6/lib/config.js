/**
 * What every k6 script reads from its environment (`k6 run -e NAME=value`), with the demo's
 * defaults (`npm start`): the service's base URL, the integration, its server key (from
 * .data/demo.json) and the origin its widgets are allowed on.
 */
const env = __ENV;

function required(name) {
  const value = env[name];
  if (!value) throw new Error(`set ${name} (k6 run -e ${name}=…); see loadtest/k6/README.md`);
  return value;
}

function count(name, fallback) {
  const value = env[name] === undefined || env[name] === '' ? fallback : Number(env[name]);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive whole number, not ${env[name]}`);
  return value;
}

export const config = {
  /** `{base_url}`: where the REST API answers */
  baseUrl: (env.BASE_URL || 'http://127.0.0.1:8080/api/v1/click2call').replace(/\/$/, ''),
  serverKey: required('SERVER_KEY'),
  integrationId: env.INTEGRATION_ID || 'c2c_demo',
  /** an origin the integration allows: widget requests and sockets carry it, as a browser would */
  origin: env.ORIGIN || 'http://127.0.0.1:3000',
  /** agents, one per virtual user: AGENT_EMAIL with {n} replaced by 1…AGENTS */
  agents: count('AGENTS', 10),
  agentEmail: env.AGENT_EMAIL || 'load-{n}@demo.example',
};

/** The agent a virtual user stands for (k6 numbers them from 1). */
export function agentOf(vu) {
  const n = ((vu - 1) % config.agents) + 1;
  return { type: 'email', value: config.agentEmail.replace('{n}', String(n)) };
}

export { count };
