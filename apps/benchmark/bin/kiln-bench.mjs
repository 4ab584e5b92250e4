#!/usr/bin/env node
// Runs the TypeScript source inside the repository (through tsx, @kiln packages resolved to
// their sources) and the built JS when installed from the registry.
import { existsSync } from 'node:fs';
import { register as registerHooks } from 'node:module';

const source = new URL('../src/index.ts', import.meta.url);
let entry;
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  registerHooks(
    'data:text/javascript,export async function resolve(s, c, next) {' +
      ' return next(s, { ...c, conditions: [...c.conditions, "@kiln/source"] }); }',
  );
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
