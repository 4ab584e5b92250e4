#!/usr/bin/env -S node --initial-old-space-size=128
// --initial-old-space-size: no full GC while the old generation (with the external memory of
// request bodies, which V8 counts against it) is below 128 MiB. Without it, a server that
// receives large tensors runs a full collection every few requests (see bench/README.md).
// Runs the TypeScript source inside the repository (through tsx, @kiln packages resolved to
// their sources) and the bundled JS when installed from the registry (bundle/, made from dist/
// when the package is packed: tools/bundle-dist.mjs).
import { existsSync } from 'node:fs';
import { register as registerHooks } from 'node:module';

const source = new URL('../src/main.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  registerHooks(
    'data:text/javascript,export async function resolve(s, c, next) {' +
      ' return next(s, { ...c, conditions: [...c.conditions, "@kiln/source"] }); }',
  );
  await import(source.href);
} else {
  await import(new URL('../bundle/main.js', import.meta.url).href);
}
