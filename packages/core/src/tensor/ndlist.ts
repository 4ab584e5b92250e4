import { KilnError, KilnErrorCode } from '../errors.js';
import type { AnyTensor } from './tensor.js';

/** An ordered list of tensors, each optionally named (DJL's NDList). */
export class NDList implements Iterable<AnyTensor> {
  readonly tensors: readonly AnyTensor[];

  constructor(tensors: readonly AnyTensor[] = []) {
    this.tensors = Object.freeze([...tensors]);
  }

  static of(...tensors: AnyTensor[]): NDList {
    return new NDList(tensors);
  }

  get length(): number {
    return this.tensors.length;
  }

  /** Tensor names in order; undefined where a tensor is unnamed. */
  get names(): (string | undefined)[] {
    return this.tensors.map((t) => t.name);
  }

  /** The tensor at an index, or with a name. Throws when absent. */
  get(key: number | string): AnyTensor {
    const tensor = this.find(key);
    if (!tensor) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        typeof key === 'number'
          ? `no tensor at index ${key} (the list has ${this.length})`
          : `no tensor named ${JSON.stringify(key)} (have: ${this.names.filter(Boolean).join(', ') || 'none named'})`,
      );
    }
    return tensor;
  }

  find(key: number | string): AnyTensor | undefined {
    return typeof key === 'number' ? this.tensors[key] : this.tensors.find((t) => t.name === key);
  }

  map(fn: (tensor: AnyTensor, index: number) => AnyTensor): NDList {
    return new NDList(this.tensors.map(fn));
  }

  [Symbol.iterator](): Iterator<AnyTensor> {
    return this.tensors[Symbol.iterator]();
  }

  toString(): string {
    return `NDList(${this.tensors.map(String).join(', ')})`;
  }
}
