import { defineConfig } from 'vitest/config';

export default defineConfig({
  // @kiln packages resolve to their TypeScript sources (the `@kiln/source` export condition),
  // not to their built dist/.
  ssr: { resolve: { conditions: ['@kiln/source', 'module', 'node', 'development|production'] } },
  // One file at a time: the first builds the conformance libdlr (cached by source hash), the
  // rest reuse it, and the parallel-contexts timing test is not squeezed by other files.
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
