import {
  type ForwardOptions,
  KilnError,
  KilnErrorCode,
  type ModelLoadRequest,
  type NDList,
  OpenContexts,
} from '@kiln/core';
import { TfHost } from '../execution/host-client.js';
import type { HostedModelFacts } from '../execution/host-protocol.js';
import type { TfModelSpec } from '../model/load-model.js';
import { BACKEND_INFO } from '../runtime/backends.js';
import type { TfRuntimeFacts } from '../runtime/resolve-runtime.js';
import type { TfMemoryInfo } from '../runtime/tfjs-api.js';
import { type TfExecutionContext, TfModelBase } from './model-base.js';
import type { TfPlacement } from './placement.js';

/**
 * Models run in host threads, so the thread that serves requests never blocks on inference.
 *
 * On the JavaScript backends (wasm, cpu) each execution context gets its own host thread
 * holding its own copy of the model: tfjs runs one op at a time per thread, so parallelism
 * comes from more threads. Native TensorFlow (tfjs-node) can be loaded by one thread per
 * process only, so all its models and contexts share one host thread, and TensorFlow's own
 * thread pools run each op in parallel.
 */
export class HostedPlacement implements TfPlacement {
  readonly description: string;
  private readonly shared: boolean;
  /** JavaScript backends: the host that resolved the runtime, kept for the first model. */
  private spare: TfHost | undefined;

  constructor(private readonly first: TfHost) {
    this.shared = BACKEND_INFO[first.facts.backend].native;
    this.spare = this.shared ? undefined : first;
    this.description = this.shared
      ? 'one shared TensorFlow thread (tfjs-node loads in one thread per process)'
      : 'one worker thread per execution context';
  }

  get facts(): TfRuntimeFacts {
    return this.first.facts;
  }

  async loadModel(spec: TfModelSpec, request: ModelLoadRequest): Promise<TfModelBase> {
    if (this.shared) {
      return new HostedModel(request, await this.first.load(spec), spec, { shared: this.first });
    }
    const host = this.spare ?? (await this.startHost());
    this.spare = undefined;
    const loaded = await host.load(spec).catch(async (error: unknown) => {
      await host.close();
      throw error;
    });
    return new HostedModel(request, loaded, spec, { spare: host, start: () => this.startHost() });
  }

  /** A further host, pinned to the backend the first one resolved. */
  private startHost(): Promise<TfHost> {
    return TfHost.start({ backends: [this.facts.backend] });
  }
}

type HostSource =
  { readonly shared: TfHost } | { readonly spare: TfHost; readonly start: () => Promise<TfHost> };

class HostedModel extends TfModelBase {
  private readonly contexts = new OpenContexts<HostedContext>(this.name);
  /** JavaScript backends: the host that loaded the model, handed to the first context. */
  private spare: { host: TfHost; handle: number } | undefined;

  constructor(
    request: ModelLoadRequest,
    private readonly loaded: HostedModelFacts,
    private readonly spec: TfModelSpec,
    private readonly source: HostSource,
  ) {
    super(request, loaded, {
      backend: ('shared' in source ? source.shared : source.spare).facts.backend,
      runsIn:
        'shared' in source
          ? 'the shared TensorFlow thread'
          : 'one worker thread per execution context',
    });
    if ('spare' in source) this.spare = { host: source.spare, handle: loaded.handle };
  }

  async newExecutionContext(): Promise<TfExecutionContext> {
    this.contexts.assertOpen();
    let context: HostedContext;
    if ('shared' in this.source) {
      context = new HostedContext(this.source.shared, this.loaded.handle, false);
    } else if (this.spare) {
      context = new HostedContext(this.spare.host, this.spare.handle, true);
      this.spare = undefined;
    } else {
      context = await this.startContext(this.source.start);
    }
    context.onClose = () => this.contexts.release(context);
    return this.contexts.track(context);
  }

  async dispose(): Promise<void> {
    if (this.contexts.closed) return;
    await this.contexts.closeAll();
    // A host that crashed has nothing left to unload.
    if ('shared' in this.source)
      await this.source.shared.unload(this.loaded.handle).catch(() => undefined);
    await this.spare?.host.close();
    this.spare = undefined;
  }

  private async startContext(start: () => Promise<TfHost>): Promise<HostedContext> {
    const host = await start();
    try {
      const { handle } = await host.load(this.spec);
      return new HostedContext(host, handle, true);
    } catch (error) {
      await host.close();
      throw error;
    }
  }
}

class HostedContext implements TfExecutionContext {
  onClose: () => void = () => undefined;
  private closed = false;

  constructor(
    private readonly host: TfHost,
    private readonly handle: number,
    /** Whether the host thread is this context's alone (closed with it). */
    private readonly ownsHost: boolean,
  ) {}

  forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    if (this.closed)
      return Promise.reject(new KilnError(KilnErrorCode.Closed, 'execution context is closed'));
    return this.host.forward(this.handle, input, options.signal);
  }

  memory(): Promise<TfMemoryInfo> {
    return this.host.memory();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
    if (this.ownsHost) await this.host.close();
  }
}
