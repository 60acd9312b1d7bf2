import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Suites open their own databases; two at a time suits a 2-core machine.
    maxWorkers: 2,
  },
});
