import { join } from 'node:path';
import { graphInputNames } from './graph-input-names.js';
import { ONNX_DTYPE_SUFFIXES, ONNX_SUBFOLDER } from './transformers-js-file.js';

/** Decoder files of a transformers.js folder, fp32 first: any dtype tells the same inputs. */
const DECODER_FILES = ['model', 'decoder_model_merged'].flatMap((stem) =>
  Object.values(ONNX_DTYPE_SUFFIXES).map((suffix) => `${ONNX_SUBFOLDER}/${stem}${suffix}.onnx`),
);

/**
 * What a Hugging Face decoder folder (transformers.js / Optimum layout: `config.json` and an
 * `onnx/` decoder taking `input_ids` and `past_key_values.*`) implies without a
 * serving.properties: text generation with the rolling-batch scheduler. Any other folder,
 * or one whose model cannot be read, implies nothing (loading reports what is wrong).
 */
export async function decoderFolderSettings(
  modelDir: string,
  fileNames: readonly string[],
): Promise<Readonly<Record<string, string>>> {
  if (!fileNames.includes('config.json')) return {};
  const file = DECODER_FILES.find((f) => fileNames.includes(f));
  if (file === undefined) return {};
  let inputs: string[];
  try {
    inputs = await graphInputNames(join(modelDir, file));
  } catch {
    return {};
  }
  const decoder =
    inputs.includes('input_ids') && inputs.some((n) => /^past_key_values\.\d+\.key$/.test(n));
  return decoder ? { 'option.rolling_batch': 'auto' } : {};
}
