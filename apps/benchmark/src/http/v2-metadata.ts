import { KilnError, KilnErrorCode, type TensorDescriptor, fromV2DType } from '@kiln/core';
import { getText } from './http-client.js';

/**
 * A model's inputs as a v2-protocol server describes them (`GET /v2/models/{m}`): empty when
 * the server answers but describes none, undefined when it does not speak v2 at all.
 */
export async function fetchV2Inputs(
  base: URL,
  model: string,
  version: string | undefined,
): Promise<TensorDescriptor[] | undefined> {
  const path = `/v2/models/${encodeURIComponent(model)}${version ? `/versions/${encodeURIComponent(version)}` : ''}`;
  const { status, text } = await getText(new URL(path, base));
  if (status === 404 && /not found|unknown|no model/i.test(text)) {
    throw new KilnError(
      KilnErrorCode.ModelNotFound,
      `the server at ${base.origin} has no model ${model}${version ? ` version ${version}` : ''}`,
      {
        details: {
          hint: 'list the models with GET /models on the management address, or load one with kiln serve -m',
        },
      },
    );
  }
  if (status !== 200) return undefined;
  let metadata: unknown;
  try {
    metadata = JSON.parse(text);
  } catch {
    return undefined;
  }
  const inputs = (metadata as { inputs?: unknown }).inputs;
  if (!Array.isArray(inputs)) return [];
  return inputs.flatMap((input: unknown) => {
    const { name, datatype, shape } = (input ?? {}) as {
      name?: unknown;
      datatype?: unknown;
      shape?: unknown;
    };
    if (typeof name !== 'string' || typeof datatype !== 'string' || !Array.isArray(shape))
      return [];
    try {
      return [{ name, dtype: fromV2DType(datatype), shape: shape.map(Number) }];
    } catch {
      return [];
    }
  });
}
