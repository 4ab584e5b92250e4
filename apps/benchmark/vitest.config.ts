import { defineConfig } from 'vitest/config';

export default defineConfig({
  // @kiln packages resolve to their TypeScript sources (the `@kiln/source` export condition),
  // not to their built dist/.
  ssr: { resolve: { conditions: ['@kiln/source', 'module', 'node', 'development|production'] } },
  test: {
    include: ['**/*.test.ts'],
    // Compiled copies of the tests live in dist/ after `tsc -b`.
    exclude: ['**/node_modules/**', '**/dist/**', '**/build/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
