import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { OnnxModel } from './graph-builder.js';
import { onnx } from './onnx-proto.js';

/** The model's protobuf bytes (what a `.onnx` file holds). */
export function encodeOnnxModel(model: OnnxModel): Uint8Array {
  return onnx.ModelProto.encode(onnx.ModelProto.create(model)).finish();
}

/** Reads protobuf bytes back into a model, e.g. to inspect an optimized graph. */
export function decodeOnnxModel(bytes: Uint8Array): OnnxModel {
  return onnx.ModelProto.decode(bytes);
}

/** Writes `model` to `path`, creating its folder. */
export async function saveOnnxModel(path: string, model: OnnxModel): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, encodeOnnxModel(model));
}
