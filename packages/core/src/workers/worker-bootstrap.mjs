// Entry of every Kiln worker thread. Runs the module named in workerData; when that module
// is TypeScript source (running from the repository), tsx is registered first, with the
// `@kiln/source` export condition so that @kiln packages resolve to their sources as well
// (Node's --conditions flag reaches worker threads, module hooks do not).
import { register as registerHooks } from 'node:module';
import { workerData } from 'node:worker_threads';

const SOURCE_CONDITION =
  'data:text/javascript,export async function resolve(s, c, next) {' +
  ' return next(s, { ...c, conditions: [...c.conditions, "@kiln/source"] }); }';

const target = workerData && workerData.__kilnWorkerModule;
if (typeof target !== 'string') throw new Error('Kiln worker started without a module to run');
if (target.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
  registerHooks(SOURCE_CONDITION);
}
await import(target);
