import { Worker, type WorkerOptions } from 'node:worker_threads';

const MODULE_KEY = '__kilnWorkerModule';

/**
 * The module `name` beside the caller, with the caller's own extension: `.ts` when running
 * from source in the repository, `.js` from the published package's dist/.
 * `siblingModule(import.meta.url, './session-worker')`.
 */
export function siblingModule(callerUrl: string, name: string): URL {
  const extension = /\.[cm]?ts$/.test(callerUrl) ? '.ts' : '.js';
  return new URL(`${name}${extension}`, callerUrl);
}

const BOOTSTRAP = new URL('./worker-bootstrap.mjs', import.meta.url);

/**
 * The bootstrap, or a data: URL importing it when this process runs code given on the command
 * line (`node --input-type=module -e …`): workers inherit `--input-type`, and with it a worker
 * whose entry is a file fails to start (ERR_INPUT_TYPE_NOT_ALLOWED).
 */
const WORKER_ENTRY = process.execArgv.some(
  (flag) => flag === '--input-type' || flag.startsWith('--input-type='),
)
  ? new URL(
      `data:text/javascript,${encodeURIComponent(`await import(${JSON.stringify(BOOTSTRAP.href)});`)}`,
    )
  : BOOTSTRAP;

/**
 * Starts a worker thread running `moduleUrl`, which may be TypeScript source or built JS.
 * `workerData` reaches the module unchanged (plus one private key).
 */
export function spawnModuleWorker(moduleUrl: URL, options: WorkerOptions = {}): Worker {
  const data: unknown = options.workerData ?? {};
  return new Worker(WORKER_ENTRY, {
    ...options,
    workerData: { ...(data as object), [MODULE_KEY]: moduleUrl.href },
  });
}
