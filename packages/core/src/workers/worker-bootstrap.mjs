// Entry of every Kiln worker thread. Runs the module named in workerData; when that module
// is TypeScript source (running from the repository), tsx is registered first.
import { workerData } from 'node:worker_threads';

const target = workerData && workerData.__kilnWorkerModule;
if (typeof target !== 'string') throw new Error('Kiln worker started without a module to run');
if (target.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(target);
