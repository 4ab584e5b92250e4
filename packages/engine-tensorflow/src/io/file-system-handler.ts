import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { TfApi, TfModelArtifacts, TfModelJSON } from '../runtime/tfjs-api.js';

type IOHandler = Parameters<TfApi['loadGraphModel']>[0] & { load(): Promise<TfModelArtifacts> };
type WeightsManifest = NonNullable<TfModelJSON['weightsManifest']>;

/** model.json holds topology and a weights manifest; anything near this size is not one. */
export const MAX_MODEL_JSON_BYTES = 512 * 1024 * 1024;

/**
 * A tfjs load handler for a TF.js model on the local file system: model.json plus the weight
 * shards its manifest names, read relative to it. tfjs's own `file://` handler exists only in
 * tfjs-node; this one works on every backend and never touches the network.
 */
export function fileSystemLoadHandler(tf: TfApi, modelJsonFile: string): IOHandler {
  return { load: () => loadArtifacts(tf, modelJsonFile) };
}

/** Reads model.json and the weights it lists, checking every path stays inside its folder. */
export async function loadArtifacts(tf: TfApi, modelJsonFile: string): Promise<TfModelArtifacts> {
  const modelJson = await readModelJson(modelJsonFile);
  const folder = path.dirname(modelJsonFile);
  return tf.io.getModelArtifactsForJSON(modelJson, async (manifest) => [
    tf.io.getWeightSpecs(manifest),
    await readShards(folder, manifest),
  ]);
}

async function readModelJson(file: string): Promise<TfModelJSON> {
  const info = await stat(file).catch((error: unknown) => {
    throw KilnError.wrap(error, KilnErrorCode.ModelLoadFailed, `cannot read ${file}`);
  });
  if (info.size > MAX_MODEL_JSON_BYTES) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `${file} holds ${info.size} bytes, more than a TF.js model.json may (${MAX_MODEL_JSON_BYTES})`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.ModelLoadFailed, `${file} is not valid JSON`);
  }
  const json = value as Partial<TfModelJSON> | null;
  if (
    typeof json !== 'object' ||
    json === null ||
    typeof json.modelTopology !== 'object' ||
    json.modelTopology === null
  ) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `${file} is not a TF.js model: it has no modelTopology`,
    );
  }
  if (json.weightsManifest !== undefined && !Array.isArray(json.weightsManifest)) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `${file} has a weightsManifest that is not a list`,
    );
  }
  return json as TfModelJSON;
}

/** The shards' bytes in manifest order, one ArrayBuffer each (tfjs decodes across them). */
async function readShards(folder: string, manifest: WeightsManifest): Promise<ArrayBuffer[]> {
  const files = manifest.flatMap((group) => (Array.isArray(group.paths) ? group.paths : []));
  return Promise.all(
    files.map(async (name) => toArrayBuffer(await readShard(shardPath(folder, name)))),
  );
}

async function readShard(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.ModelLoadFailed, `cannot read weight shard ${file}`);
  }
}

function shardPath(folder: string, name: unknown): string {
  if (typeof name !== 'string' || name === '') {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `weights manifest names a shard ${JSON.stringify(name)}`,
    );
  }
  // Names are plain relative paths, as tfjs-node's file handler reads them.
  const file = path.resolve(folder, name);
  const relative = path.relative(folder, file);
  if (relative.startsWith('..') || path.isAbsolute(relative)) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `weights manifest names ${JSON.stringify(name)}, which lies outside the model folder ${folder}`,
    );
  }
  return file;
}

function toArrayBuffer(bytes: Buffer): ArrayBuffer {
  if (
    bytes.byteOffset === 0 &&
    bytes.byteLength === bytes.buffer.byteLength &&
    bytes.buffer instanceof ArrayBuffer
  ) {
    return bytes.buffer;
  }
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}
