import { defineConfig } from 'vitest/config';

// Lets `npx vitest` at the root run every workspace; nx runs each package on its own.
export default defineConfig({
  test: { projects: ['packages/*', 'apps/*', 'tools/*', 'native/*', 'test', 'bench'] },
});
