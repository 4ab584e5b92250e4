import { readdir, stat } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';

/**
 * The .onnx file to load, as DJL picks it: the file the request names, else `<name>.onnx`,
 * else `model.onnx`, else the only .onnx file in the folder.
 */
export async function findModelFile(
  modelDir: string,
  name: string,
  modelFile?: string,
): Promise<string> {
  if (modelFile) {
    const path = isAbsolute(modelFile) ? modelFile : join(modelDir, modelFile);
    if (!(await isFile(path)))
      throw new KilnError(KilnErrorCode.ModelNotFound, `model file ${path} does not exist`);
    return path;
  }
  let entries: string[];
  try {
    entries = await readdir(modelDir);
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.ModelNotFound,
      `cannot read model folder ${modelDir}`,
    );
  }
  const onnx = entries.filter((f) => f.toLowerCase().endsWith('.onnx'));
  const pick =
    [`${name}.onnx`, 'model.onnx'].find((f) => onnx.includes(f)) ??
    (onnx.length === 1 ? onnx[0] : undefined);
  if (pick) return join(modelDir, pick);
  throw new KilnError(
    onnx.length === 0 ? KilnErrorCode.ModelNotFound : KilnErrorCode.ModelLoadFailed,
    onnx.length === 0
      ? `no .onnx file in ${modelDir}`
      : `${modelDir} holds several .onnx files (${onnx.join(', ')}); name one ${name}.onnx or model.onnx, or pick one with the model file option`,
  );
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
