/**
 * Names of the advisory locks that serialise transactions (Db.tx's `lock`): every node uses the
 * same names, so two nodes changing one agent take turns.
 */

/**
 * One agent of one integration: pairing a window (which may replace the open one, carrying its
 * availability over) and setting the agent's availability happen one at a time.
 */
export const agentLock = (integrationId: string, memberId: string) => `agent:${integrationId}:${memberId}`;

/** One integration: POST /calls checks concurrency and the agent's readiness under it. */
export const integrationLock = (integrationId: string) => integrationId;
