import { type DType, dtypeNames } from '@kiln/core';
import { type Attribute, toAttributeProto } from './attributes.js';
import type { OnnxTypes } from './onnx-proto.js';
import { type InitializerData, toTensorProto } from './tensor-proto.js';

/** A dimension: a fixed size, or a name (ONNX dim_param) for a dynamic one such as 'batch'. */
export type Dim = number | string;

/** A whole ONNX model, ready for `saveOnnxModel`. */
export type OnnxModel = OnnxTypes.IModelProto;

export interface ModelOptions {
  /** Default opset; 17 is the newest that every ONNX Runtime Kiln supports implements fully. */
  readonly opset?: number;
  readonly producerName?: string;
  readonly docString?: string;
  /** Extra domains, e.g. `{ 'com.microsoft': 1 }`. */
  readonly extraOpsets?: Readonly<Record<string, number>>;
  /** Key/value pairs stored in the model's metadata_props. */
  readonly metadata?: Readonly<Record<string, string>>;
}

export interface NodeOptions {
  readonly name?: string;
  readonly domain?: string;
}

/** ONNX IR version 8 is the one that goes with opset 17 (ONNX 1.12). */
const IR_VERSION = 8;
export const DEFAULT_OPSET = 17;

/**
 * Builds an ONNX graph step by step: declare inputs, outputs and initializers, then add
 * nodes whose outputs are named automatically unless named explicitly.
 */
export class GraphBuilder {
  private readonly inputs: OnnxTypes.IValueInfoProto[] = [];
  private readonly outputs: OnnxTypes.IValueInfoProto[] = [];
  private readonly initializers: OnnxTypes.ITensorProto[] = [];
  private readonly nodes: OnnxTypes.INodeProto[] = [];
  private readonly names = new Set<string>();
  private counter = 0;

  constructor(readonly graphName: string) {}

  /** Declares a graph input; a `null` shape leaves its rank unknown (any shape). */
  input(name: string, dtype: DType, shape: readonly Dim[] | null): string {
    this.claim(name);
    this.inputs.push(valueInfo(name, dtype, shape));
    return name;
  }

  /** Declares a graph output; some node (or an input) must produce `name`. */
  output(name: string, dtype: DType, shape: readonly Dim[] | null): string {
    this.outputs.push(valueInfo(name, dtype, shape));
    return name;
  }

  initializer(name: string, dtype: DType, dims: readonly number[], data: InitializerData): string {
    return this.addInitializer(this.claim(name), dtype, dims, data);
  }

  /** A float32 initializer under a fresh name derived from `prefix`. */
  weight(prefix: string, dims: readonly number[], data: Float32Array): string {
    return this.addInitializer(this.fresh(prefix), 'float32', dims, data);
  }

  /** An int64 initializer (shapes, axes, indices) under a fresh name. */
  int64s(
    prefix: string,
    values: readonly number[],
    dims: readonly number[] = [values.length],
  ): string {
    return this.addInitializer(
      this.fresh(prefix),
      'int64',
      dims,
      BigInt64Array.from(values, BigInt),
    );
  }

  /** A float32 scalar initializer under a fresh name. */
  scalar(prefix: string, value: number): string {
    return this.addInitializer(this.fresh(prefix), 'float32', [], Float32Array.of(value));
  }

  /**
   * Adds a node. `outputs` is either the output names or how many fresh ones to make.
   * Returns the output names.
   */
  node(
    opType: string,
    inputs: readonly string[],
    outputs: readonly string[] | number = 1,
    attributes: Readonly<Record<string, Attribute>> = {},
    options: NodeOptions = {},
  ): string[] {
    const outputNames =
      typeof outputs === 'number'
        ? Array.from({ length: outputs }, () => this.fresh(opType.toLowerCase()))
        : outputs.map((name) => this.claim(name));
    this.nodes.push({
      opType,
      name: options.name ?? this.fresh(`${opType}_node`),
      domain: options.domain ?? '',
      input: [...inputs],
      output: outputNames,
      attribute: Object.entries(attributes).map(([key, value]) => toAttributeProto(key, value)),
    });
    return outputNames;
  }

  /** A node with one output; returns its name. */
  op(
    opType: string,
    inputs: readonly string[],
    attributes: Readonly<Record<string, Attribute>> = {},
    options: NodeOptions & { output?: string } = {},
  ): string {
    const [output] = this.node(
      opType,
      inputs,
      options.output ? [options.output] : 1,
      attributes,
      options,
    );
    return output!;
  }

  /** A name no other value in this graph uses. */
  fresh(prefix: string): string {
    let name: string;
    do name = `${prefix}_${this.counter++}`;
    while (this.names.has(name));
    this.names.add(name);
    return name;
  }

  toModel(options: ModelOptions = {}): OnnxModel {
    const opsets = [{ domain: '', version: options.opset ?? DEFAULT_OPSET }];
    for (const [domain, version] of Object.entries(options.extraOpsets ?? {})) {
      opsets.push({ domain, version });
    }
    return {
      irVersion: IR_VERSION,
      producerName: options.producerName ?? 'kiln-model-tools',
      producerVersion: '0.1.0',
      docString: options.docString ?? '',
      opsetImport: opsets,
      metadataProps: Object.entries(options.metadata ?? {}).map(([key, value]) => ({ key, value })),
      graph: {
        name: this.graphName,
        input: this.inputs,
        output: this.outputs,
        initializer: this.initializers,
        node: this.nodes,
      },
    };
  }

  private addInitializer(
    name: string,
    dtype: DType,
    dims: readonly number[],
    data: InitializerData,
  ): string {
    this.initializers.push(toTensorProto(name, dtype, dims, data));
    return name;
  }

  private claim(name: string): string {
    if (this.names.has(name))
      throw new Error(`graph ${this.graphName} already has a value named ${name}`);
    this.names.add(name);
    return name;
  }
}

function valueInfo(
  name: string,
  dtype: DType,
  shape: readonly Dim[] | null,
): OnnxTypes.IValueInfoProto {
  if (shape === null) return { name, type: { tensorType: { elemType: dtypeNames(dtype).onnx } } };
  return {
    name,
    type: {
      tensorType: {
        elemType: dtypeNames(dtype).onnx,
        shape: {
          dim: shape.map((dim) => {
            if (typeof dim === 'string') return { dimParam: dim };
            if (!Number.isSafeInteger(dim) || dim < 0) {
              throw new Error(
                `${name}: dimension ${dim} must be a size ≥ 0 or a name for a dynamic one`,
              );
            }
            return { dimValue: dim };
          }),
        },
      },
    },
  };
}
