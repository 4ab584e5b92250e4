import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    // The container test builds an image: it runs with `npm run test:container` only.
    exclude: ['**/node_modules/**', '**/dist/**', 'container/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
