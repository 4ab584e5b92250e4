#!/usr/bin/env node
// Runs the TypeScript source inside the repository (through tsx) and the built JS when
// installed from the registry.
import { existsSync } from 'node:fs';

const source = new URL('../src/main.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import(new URL('../dist/main.js', import.meta.url).href);
}
