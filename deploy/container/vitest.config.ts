import { defineConfig } from 'vitest/config';

// `npm run test:container`: builds the image and runs it; minutes, so not part of `npm test`.
export default defineConfig({
  // @kiln packages resolve to their TypeScript sources (the `@kiln/source` export condition),
  // not to their built dist/.
  ssr: { resolve: { conditions: ['@kiln/source', 'module', 'node', 'development|production'] } },
  test: {
    include: ['container/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    testTimeout: 120_000,
    hookTimeout: 1_200_000,
  },
});
