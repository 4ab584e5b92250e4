import { type DType, KilnError, KilnErrorCode, type TensorDescriptor, isDType } from '@kiln/core';

/**
 * Names, dtypes and shapes of a model's inputs and outputs. TorchScript's own schema has names
 * but no dtypes or shapes, so Kiln stores a signature inside the archive as an extra file when
 * it writes a module (saveScriptModule); modules from elsewhere get what the schema tells.
 */
export interface PtSignature {
  readonly inputs: readonly TensorDescriptor[];
  readonly outputs: readonly TensorDescriptor[];
}

/** Extra file of a TorchScript archive holding Kiln's signature (JSON). */
export const SIGNATURE_FILE = 'kiln-signature.json';

export function formatSignature(signature: PtSignature): string {
  return JSON.stringify({ inputs: signature.inputs, outputs: signature.outputs });
}

/** Reads a stored signature; a malformed one fails the load rather than mislead callers. */
export function parseSignature(text: string, file: string): PtSignature {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.ModelLoadFailed,
      `${file}: ${SIGNATURE_FILE} is not JSON`,
    );
  }
  const list = (key: 'inputs' | 'outputs'): TensorDescriptor[] => {
    const entries = (value as Record<string, unknown> | null)?.[key];
    if (!Array.isArray(entries)) {
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `${file}: ${SIGNATURE_FILE} has no ${key} list`,
      );
    }
    return entries.map((entry: unknown, i) =>
      descriptor(entry, `${file}: ${SIGNATURE_FILE} ${key}[${i}]`),
    );
  };
  return { inputs: list('inputs'), outputs: list('outputs') };
}

function descriptor(entry: unknown, where: string): TensorDescriptor {
  const { name, dtype, shape } = (entry ?? {}) as {
    name?: unknown;
    dtype?: unknown;
    shape?: unknown;
  };
  if (
    typeof name !== 'string' ||
    !isDType(dtype) ||
    !Array.isArray(shape) ||
    !shape.every((d) => Number.isInteger(d) && (d as number) >= -1)
  ) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `${where} must be { name, dtype, shape } with a Kiln dtype`,
    );
  }
  return { name, dtype: dtype as DType, shape: shape as number[] };
}

/**
 * What a module's forward schema tells when it has no stored signature: the names of its
 * tensor arguments, and nothing about their dtypes or shapes (a traced or scripted module
 * carries neither), so any dtype and shape is accepted; the outputs are unknown until the
 * model runs.
 */
export function signatureFromSchema(
  argumentsOfForward: readonly { name: string; type: string }[],
): PtSignature {
  return {
    inputs: argumentsOfForward
      .filter((a) => a.type === 'Tensor' || a.type === 'Optional[Tensor]')
      .map((a) => ({ name: a.name })),
    outputs: [],
  };
}
