/**
 * Limits of spec section 8 as named constants, plus the values the spec leaves open
 * (marked "decided"), each explained in the README's decisions table.
 */
export const LIMITS = {
  widgetTokenTtlSeconds: 30 * 60,
  launchTicketTtlSeconds: 10 * 60,
  callIntentExpirySeconds: 60,
  callStartWaitSeconds: 30,
  engineOfflineAfterSeconds: 90,

  idempotencyKeyMaxLength: 120,
  displayFieldMaxLength: 120,
  metadataMaxBytes: 2000,

  rateWindowMs: 60_000,
  serverKeyPerIpPerMinute: 300,
  serverKeyPerIntegrationPerMinute: 600,
  widgetPerIpPerMinute: 600,

  /** decided: how often a widget polls GET /widget/state while its socket is down */
  pollMs: 3000,
  /** decided: engine heartbeat period while its socket is up, and while it is down */
  heartbeatMs: 15_000,
  heartbeatFallbackMs: 3000,
  /**
   * decided: a heartbeat over the socket hands a command over again only once this long has passed
   * since its first hand-over without an ack (its ack may still be on the way). A heartbeat over
   * REST hands over every unacked command whatever its age (api/domain/engines/heartbeat.ts).
   */
  redeliverAfterMs: 2500,
  /** decided: engine endpoints are limited per engine, not per IP (call centres share NAT) */
  enginePerEnginePerMinute: 600,
  /**
   * decided: bad credentials per client address in the gateway's handshakes (nothing else limits
   * them before their token is read); past it the address's handshakes are refused unread
   */
  refusedCredentialsPerIpPerMinute: 600,
  /** decided: socket handshakes of one client address checked on a node at once (none of them counted yet) */
  handshakesInFlightPerIp: 200,
  /**
   * decided: sockets one credential (a widget token, an engine token) holds on a node at once. A
   * page holds one, a token shared by a few tabs a few, and a client whose network flapped its
   * stale ones until their ping timeout (at most 20 s). A handshake past it is refused
   * rate_limited: one valid token could otherwise hold a node's memory and descriptors.
   */
  socketsPerCredentialPerNode: 20,
  /** decided: an engine token dies after this long without a heartbeat */
  engineTokenIdleSeconds: 24 * 60 * 60,
  /**
   * decided: an engine whose socket dropped and that has not heartbeated since is offline after
   * this; one with a call is left to the 90 s rules. Longer than heartbeatMs: a window that
   * reconnected (to any node) before this node saw its old socket go, which can take the ping
   * timeout, heartbeats on its new socket every heartbeatMs; one without a socket does every
   * heartbeatFallbackMs.
   */
  engineDropGraceSeconds: 20,
  /**
   * decided: once a node's store failed a statement (an outage, a lock), its reaper judges no
   * window's silence until the store has answered this long: windows could not report to a store
   * that did not answer, so the silence was not theirs. Longer than heartbeatMs, so every live
   * window has reported again by then.
   */
  storeRecoveryGraceSeconds: 20,
  /**
   * decided: a store that keeps failing now and then (a statement timing out every few seconds
   * under load) would put that grace off for ever, and dead windows' calls would never end; once
   * the reaper has run this long without judging silence, it judges anyway. Windows that live have
   * reported in that time (most statements succeed).
   */
  storeTroubleMaxSeconds: 5 * 60,
  /** decided: an engine silent this long no longer holds its calls: they are flagged orphaned */
  engineStaleSeconds: 30,
  /** decided: a heartbeat not mentioning a call orphans it only after this grace (the claim may be in flight) */
  orphanGraceSeconds: 5,
  /** decided: a claimed intent whose provider leg never starts fails after this */
  claimConnectTimeoutSeconds: 60,
  /** decided: after a refresh, the previous widget token keeps working this long (in-flight requests) */
  widgetTokenRefreshGraceSeconds: 30,
  /** decided: platform cap on any call, whatever the policy says */
  platformMaxCallSeconds: 4 * 60 * 60,
  /** decided: a call must be affordable for at least this long to be placed */
  minAffordableCallSeconds: 60,
  /** decided: default per-integration concurrent call limit */
  defaultConcurrencyLimit: 10,
  /** decided: longest origin we accept (scheme://host:port) */
  originMaxLength: 255,
  /** decided: longest agent identifier value */
  agentValueMaxLength: 254,
  /** decided: a request_id of a widget command */
  requestIdMaxLength: 120,
  /** decided: dtmf digits per command */
  dtmfMaxDigits: 32,
  /** decided: largest request body, and largest socket message (a command is under 2 KB; a heartbeat with its most acks about 25 KB) */
  requestMaxBytes: 64 * 1024,
} as const;
