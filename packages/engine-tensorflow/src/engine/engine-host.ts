import { TfHost } from '../execution/host-client.js';
import { BACKEND_INFO, type TfBackendName } from '../runtime/backends.js';

// Native TensorFlow (tfjs-node) loads in one thread per process, so the first host that got
// it stays the process's native host, shared by every engine that may use it. Starts that
// may load it are chained, so that two engines never race to load it in two threads.
let nativeHost: Promise<TfHost | undefined> = Promise.resolve(undefined);

const isNative = (backend: TfBackendName) => BACKEND_INFO[backend].native;

/**
 * The first host of an engine: the process's native host when there is one and the engine
 * may use its backend, else a new host that tries `backends` best first.
 */
export function startEngineHost(backends: readonly TfBackendName[]): Promise<TfHost> {
  if (!backends.some(isNative)) return TfHost.start({ backends });
  const previous = nativeHost;
  const host = previous.then((existing) =>
    existing && backends.includes(existing.facts.backend) ? existing : TfHost.start({ backends }),
  );
  nativeHost = Promise.all([previous, host.catch(() => undefined)]).then(
    ([existing, started]) =>
      existing ?? (started && isNative(started.facts.backend) ? started : undefined),
  );
  return host;
}
