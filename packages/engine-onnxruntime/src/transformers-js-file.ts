import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';

/** The folder transformers.js and Optimum keep a model's ONNX files in. */
export const ONNX_SUBFOLDER = 'onnx';

/** transformers.js's `dtype` names and the file-name suffix each loads. */
export const ONNX_DTYPE_SUFFIXES = {
  fp32: '',
  fp16: '_fp16',
  q8: '_quantized',
  int8: '_int8',
  uint8: '_uint8',
  q4: '_q4',
  q4f16: '_q4f16',
  bnb4: '_bnb4',
} as const;

export type OnnxDtype = keyof typeof ONNX_DTYPE_SUFFIXES;

/** File stems a decoder goes by there: Optimum's plain export, then its merged decoder. */
const STEMS = ['model', 'decoder_model_merged'];

function isDtype(dtype: string): dtype is OnnxDtype {
  return Object.hasOwn(ONNX_DTYPE_SUFFIXES, dtype);
}

/**
 * The model file of a transformers.js folder (`onnx/model{suffix}.onnx`, or
 * `onnx/decoder_model_merged{suffix}.onnx`) for `dtype` (default fp32), as transformers.js
 * names them; undefined when the folder has no `onnx/` with a model in it. Throws when
 * `dtype` is unknown or its file is absent, naming the files there are.
 */
export async function findTransformersJsFile(
  dir: string,
  dtype: string | undefined,
): Promise<string | undefined> {
  if (dtype !== undefined && !isDtype(dtype))
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `option.dtype ${dtype} is not one of ${Object.keys(ONNX_DTYPE_SUFFIXES).join(', ')}`,
    );
  let files: string[];
  try {
    files = (await readdir(join(dir, ONNX_SUBFOLDER))).filter((f) => f.endsWith('.onnx'));
  } catch {
    return undefined;
  }
  if (files.length === 0) return undefined;
  const wanted = dtype ?? 'fp32';
  const suffix = ONNX_DTYPE_SUFFIXES[wanted];
  const file = STEMS.map((stem) => `${stem}${suffix}.onnx`).find((f) => files.includes(f));
  if (file) return join(dir, ONNX_SUBFOLDER, file);
  throw new KilnError(
    KilnErrorCode.ModelNotFound,
    `${join(dir, ONNX_SUBFOLDER)} has no ${wanted} model (model${suffix}.onnx); it holds ${files.sort().join(', ')}: choose one with option.dtype`,
  );
}
