import { decodeTensors } from '../codecs/tensor-codec.js';
import { NDList } from '../tensor/ndlist.js';
import type { ServingInput, ServingPart } from '../translate/serving-io.js';

/**
 * The tensors of a multipart request's parts, joined into one list; a part holding one
 * unnamed tensor takes its form field's name. Decoded by the translator, where the model runs.
 */
export function tensorsOfParts(
  parts: readonly ServingPart[],
  maxBytes: number | undefined,
): NDList {
  return new NDList(
    parts.flatMap((part) =>
      decodeTensors(part.data, {
        ...(maxBytes === undefined ? {} : { maxBytes }),
        ...(part.contentType ? { contentType: part.contentType } : {}),
      }).tensors.map((t, _i, all) =>
        all.length === 1 && t.name === undefined ? t.withName(part.name) : t,
      ),
    ),
  );
}

/** The input's tensors: carried, or decoded from its multipart parts; undefined for a body. */
export function carriedTensors(input: ServingInput, maxBytes?: number): NDList | undefined {
  if (input.tensors) return input.tensors;
  if (input.parts) return tensorsOfParts(input.parts, maxBytes ?? input.maxDecodedBytes);
  return undefined;
}
