import { defineConfig } from 'vitest/config';

export default defineConfig({
  // @kiln packages resolve to their TypeScript sources (the `@kiln/source` export condition),
  // not to their built dist/.
  ssr: { resolve: { conditions: ['@kiln/source', 'module', 'node', 'development|production'] } },
  test: { include: ['src/**/*.test.ts'] },
});
