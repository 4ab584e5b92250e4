import { KilnError, KilnErrorCode, type NumericDType, isDType, isNumericDType } from '@kiln/core';

/**
 * Kiln's dtype for a TVM element type. TVM spells the types Kiln exchanges exactly as Kiln
 * does (`float32`, `int64`, `uint8`, `bool`, `float16`, `bfloat16`…); vector lanes
 * (`float32x4`) and custom types have no Kiln counterpart.
 */
export function dtypeOfTvmType(type: string, what: string): NumericDType {
  if (isDType(type) && isNumericDType(type)) return type;
  throw new KilnError(
    KilnErrorCode.UnsupportedDType,
    `${what} has TVM type ${JSON.stringify(type)}, which Kiln cannot exchange`,
  );
}
