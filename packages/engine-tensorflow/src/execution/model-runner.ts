import { KilnError, KilnErrorCode, NDList } from '@kiln/core';
import { fromTfTensor, toTfTensor } from '../convert/tensors.js';
import { AsyncExecutionRequired, type TfLoadedModel } from '../model/loaded-model.js';
import type { TfRuntime } from '../runtime/resolve-runtime.js';
import type { TfTensor } from '../runtime/tfjs-api.js';
import { type BoundInput, tfjsInputs } from './tfjs-inputs.js';

/**
 * Runs a loaded model in this thread. Every tensor a request creates is disposed before the
 * request ends: synchronous runs happen inside `tf.tidy`, asynchronous ones dispose their
 * inputs and outputs by hand (the graph executor disposes its intermediates).
 */
export class TfModelRunner {
  // Runs on one model are serialised: an asynchronous graph run must not interleave another.
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly runtime: TfRuntime,
    readonly name: string,
    readonly model: TfLoadedModel,
  ) {}

  /** Binds, runs and converts; errors are KilnErrors with a stable code. */
  run(input: NDList): Promise<NDList> {
    const result = this.queue.then(() => this.runNow(input));
    this.queue = result.catch(() => undefined);
    return result;
  }

  dispose(): void {
    this.model.dispose();
  }

  private async runNow(input: NDList): Promise<NDList> {
    const bound = tfjsInputs(this.model.inputs, input);
    try {
      if (!this.model.asynchronous) {
        try {
          return this.runSync(bound);
        } catch (error) {
          if (!(error instanceof AsyncExecutionRequired)) throw error;
        }
      }
      return await this.runAsync(bound);
    } catch (error) {
      throw KilnError.wrap(
        error,
        KilnErrorCode.EngineError,
        `TensorFlow.js failed to run ${this.name}`,
      );
    }
  }

  private runSync(bound: readonly BoundInput[]): NDList {
    let output: NDList | undefined;
    this.runtime.tf.tidy(() => {
      output = this.read(this.model.executeSync(this.feeds(bound, [])));
    });
    return output!;
  }

  private async runAsync(bound: readonly BoundInput[]): Promise<NDList> {
    const created: TfTensor[] = [];
    try {
      const feeds = this.feeds(bound, created);
      const outputs = await this.model.executeAsync(feeds);
      created.push(...outputs);
      return this.read(outputs);
    } finally {
      this.runtime.tf.dispose(created);
    }
  }

  /** The input tensors, each also pushed to `created` as soon as it exists. */
  private feeds(bound: readonly BoundInput[], created: TfTensor[]): TfTensor[] {
    return bound.map((b) => {
      const tensor = toTfTensor(this.runtime.tf, b.tensor, b.dtype);
      created.push(tensor);
      return tensor;
    });
  }

  private read(outputs: readonly TfTensor[]): NDList {
    const sharesStorage = this.runtime.facts.backend === 'cpu';
    return new NDList(
      outputs.map((t, i) =>
        fromTfTensor(t, this.model.outputs[i]?.name ?? `output_${i}`, sharesStorage),
      ),
    );
  }
}
