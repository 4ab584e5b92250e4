import type { AnyTensor } from '@kiln/core';
import type { ModuleWrap } from '@kiln/libtorch-native';
import { libtorch, native, toKilnError } from './native.js';
import { type PtSignature, SIGNATURE_FILE, formatSignature } from './signature.js';
import { toHostTensor } from './tensor-bridge.js';

/** A TorchScript module written from source, with no Python involved. */
export interface ScriptModuleSpec {
  /** TorchScript source defining `forward` (methods take `self`). */
  readonly source: string;
  /** Class name (default KilnModule). */
  readonly name?: string;
  /** Weights, reachable as `self.<name>`. */
  readonly parameters?: Readonly<Record<string, AnyTensor>>;
  readonly buffers?: Readonly<Record<string, AnyTensor>>;
  /** Names, dtypes and shapes of inputs and outputs, stored in the archive for Kiln. */
  readonly signature?: PtSignature;
  /** Extra files stored in the archive (read back with option.extraFiles). */
  readonly extraFiles?: Readonly<Record<string, string>>;
}

/** Compiles TorchScript source into a module (synchronous: the compiler is fast on small sources). */
export function compileScriptModule(spec: ScriptModuleSpec): ModuleWrap {
  const tensors = (record: Readonly<Record<string, AnyTensor>> | undefined) =>
    record && Object.fromEntries(Object.entries(record).map(([k, t]) => [k, toHostTensor(t, k)]));
  const binding = libtorch();
  try {
    return binding.ModuleWrap.compile({
      source: spec.source,
      name: spec.name,
      parameters: tensors(spec.parameters),
      buffers: tensors(spec.buffers),
    });
  } catch (error) {
    throw toKilnError(error);
  }
}

/** Compiles `spec` and saves it as a TorchScript archive that LibTorch and Python torch load. */
export async function saveScriptModule(file: string, spec: ScriptModuleSpec): Promise<void> {
  const module = compileScriptModule(spec);
  try {
    const extraFiles = { ...spec.extraFiles };
    if (spec.signature) extraFiles[SIGNATURE_FILE] = formatSignature(spec.signature);
    await native(() => module.save(file, extraFiles));
  } finally {
    module.dispose();
  }
}
