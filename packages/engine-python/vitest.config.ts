import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    // Compiled copies of the tests live in dist/ after `tsc -b`.
    exclude: ['**/node_modules/**', '**/dist/**', '**/build/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
