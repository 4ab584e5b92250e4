#!/usr/bin/env node
// Runs the TypeScript source inside the repository (through tsx) and the built JS when
// installed from the registry.
import { existsSync } from 'node:fs';

const source = new URL('../src/index.ts', import.meta.url);
let entry;
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  entry = source.href;
} else {
  entry = new URL('../dist/index.js', import.meta.url).href;
}
// A reader that stops early (`kiln-bench --help | head`) is not an error.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});
const { runBench } = await import(entry);
process.exitCode = await runBench(process.argv.slice(2));
