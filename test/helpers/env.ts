/**
 * Which real services the suites can use. On a laptop without PostgreSQL or Redis the suites that
 * need them skip with one line; under CI (CI=true) a missing service fails the run instead.
 */
const announced = new Set<string>();

function requireOrSkip(variable: string, what: string): string | undefined {
  const value = process.env[variable];
  if (value) return value;
  if (process.env.CI) throw new Error(`${variable} must be set in CI: the ${what} suites may not skip there.`);
  if (!announced.has(variable)) {
    announced.add(variable);
    console.warn(`skipping ${what} suites: ${variable} is not set`);
  }
  return undefined;
}

export const postgresUrl = (): string | undefined => requireOrSkip('DATABASE_URL', 'PostgreSQL');
export const redisUrl = (): string | undefined => requireOrSkip('REDIS_URL', 'Redis');

export type StoreDriver = 'pglite' | 'pg';

/** The store drivers every store-touching suite runs on. */
export function storeDrivers(): StoreDriver[] {
  return postgresUrl() ? ['pglite', 'pg'] : ['pglite'];
}
