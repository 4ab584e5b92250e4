// The protocol's messages as @grpc/proto-loader hands them over (PROTO_LOADER_OPTIONS):
// snake_case fields, int64 as decimal strings, bytes as Buffers, unset messages as null.

export interface InferParameter {
  readonly parameter_choice?: 'bool_param' | 'int64_param' | 'string_param';
  readonly bool_param?: boolean;
  readonly int64_param?: string;
  readonly string_param?: string;
}

export interface InferTensorContents {
  readonly bool_contents: readonly boolean[];
  readonly int_contents: readonly number[];
  readonly int64_contents: readonly string[];
  readonly uint_contents: readonly number[];
  readonly uint64_contents: readonly string[];
  readonly fp32_contents: readonly number[];
  readonly fp64_contents: readonly number[];
  readonly bytes_contents: readonly Buffer[];
}

export interface InferInputTensor {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly string[];
  readonly parameters: Readonly<Record<string, InferParameter>>;
  readonly contents: InferTensorContents | null;
}

export interface ModelInferRequest {
  readonly model_name: string;
  readonly model_version: string;
  readonly id: string;
  readonly parameters: Readonly<Record<string, InferParameter>>;
  readonly inputs: readonly InferInputTensor[];
  readonly outputs: readonly { readonly name: string }[];
  readonly raw_input_contents: readonly Buffer[];
}

/** What Kiln sends: shapes as numbers (proto-loader encodes them as int64). */
export interface InferOutputTensor {
  name: string;
  datatype: string;
  shape: number[];
}

export interface ModelInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  outputs: InferOutputTensor[];
  raw_output_contents: Buffer[];
}

export interface ModelRef {
  readonly name: string;
  readonly version: string;
}
