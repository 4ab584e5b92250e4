import { defineConfig } from 'vitest/config';

export default defineConfig({
  // @kiln packages resolve to their TypeScript sources (the `@kiln/source` export condition),
  // not to their built dist/.
  ssr: { resolve: { conditions: ['@kiln/source', 'module', 'node', 'development|production'] } },
  test: {
    include: ['**/*.test.ts'],
    // Compiled copies of the tests live in dist/ after `tsc -b`.
    exclude: ['**/node_modules/**', '**/dist/**'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    // Memory checks collect garbage first, so that they measure leaks rather than GC timing.
    execArgv: ['--expose-gc'],
    // HTTP tests start servers with worker threads; one file at a time keeps timings sane on 2 cores.
    fileParallelism: false,
  },
});
