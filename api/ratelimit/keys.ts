/**
 * The counter keys of the rate limits (spec section 8, and those decided in shared/limits.ts), one
 * per limit and subject. REST (api/http/rate-limits.ts) and the gateway's sockets
 * (gateway/limits.ts) count through these, so a client's requests on both count in one window.
 */
export const RATE_KEYS = {
  serverKeyPerIp: (ip: string) => `sk-ip:${ip}`,
  serverKeyPerIntegration: (integrationId: string) => `sk-int:${integrationId}`,
  widgetPerIp: (ip: string) => `w-ip:${ip}`,
  enginePerEngine: (engineId: string) => `eng:${engineId}`,
  /** an engine's acks over its socket (on REST they ride its heartbeats) */
  engineAcks: (engineId: string) => `eng-ack:${engineId}`,
  refusedCredentialsPerIp: (ip: string) => `refused-ip:${ip}`,
} as const;
