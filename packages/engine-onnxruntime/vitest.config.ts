import { defineConfig } from 'vitest/config';

export default defineConfig({
  // @kiln packages resolve to their TypeScript sources (the `@kiln/source` export condition),
  // not to their built dist/.
  ssr: { resolve: { conditions: ['@kiln/source', 'module', 'node', 'development|production'] } },
  // Timing tests compare ratios within one run; running files one after another keeps the
  // two cores to one file at a time.
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
