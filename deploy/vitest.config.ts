import { defineConfig } from 'vitest/config';

export default defineConfig({
  // @kiln packages resolve to their TypeScript sources (the `@kiln/source` export condition),
  // not to their built dist/.
  ssr: { resolve: { conditions: ['@kiln/source', 'module', 'node', 'development|production'] } },
  test: {
    include: ['**/*.test.ts'],
    // The container test builds an image: it runs with `npm run test:container` only.
    exclude: ['**/node_modules/**', '**/dist/**', 'container/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
