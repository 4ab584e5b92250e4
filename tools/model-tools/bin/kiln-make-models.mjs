#!/usr/bin/env node
// Runs the TypeScript source inside the repository (through tsx, @kiln packages resolved to
// their sources) and the built JS when installed from the registry.
import { existsSync } from 'node:fs';
import { register as registerHooks } from 'node:module';

const source = new URL('../src/cli.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  registerHooks(
    'data:text/javascript,export async function resolve(s, c, next) {' +
      ' return next(s, { ...c, conditions: [...c.conditions, "@kiln/source"] }); }',
  );
  await import(source.href);
} else {
  await import(new URL('../dist/cli.js', import.meta.url).href);
}
