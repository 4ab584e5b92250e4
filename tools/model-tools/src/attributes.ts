import { onnx, type OnnxTypes } from './onnx-proto.js';

/**
 * A node attribute with its ONNX type spelled out: JS numbers cannot tell an INT from a
 * FLOAT (epsilon = 1 must stay a float), so every attribute says which it is.
 */
export type Attribute =
  | { readonly type: 'int'; readonly value: number }
  | { readonly type: 'float'; readonly value: number }
  | { readonly type: 'string'; readonly value: string }
  | { readonly type: 'ints'; readonly value: readonly number[] }
  | { readonly type: 'floats'; readonly value: readonly number[] }
  | { readonly type: 'tensor'; readonly value: OnnxTypes.ITensorProto };

export const attr = {
  int: (value: number): Attribute => ({ type: 'int', value }),
  float: (value: number): Attribute => ({ type: 'float', value }),
  string: (value: string): Attribute => ({ type: 'string', value }),
  ints: (value: readonly number[]): Attribute => ({ type: 'ints', value }),
  floats: (value: readonly number[]): Attribute => ({ type: 'floats', value }),
  tensor: (value: OnnxTypes.ITensorProto): Attribute => ({ type: 'tensor', value }),
};

const TYPES = onnx.AttributeProto.AttributeType;

export function toAttributeProto(name: string, attribute: Attribute): OnnxTypes.IAttributeProto {
  switch (attribute.type) {
    case 'int':
      return { name, type: TYPES.INT, i: attribute.value };
    case 'float':
      return { name, type: TYPES.FLOAT, f: attribute.value };
    case 'string':
      return { name, type: TYPES.STRING, s: new TextEncoder().encode(attribute.value) };
    case 'ints':
      return { name, type: TYPES.INTS, ints: [...attribute.value] };
    case 'floats':
      return { name, type: TYPES.FLOATS, floats: [...attribute.value] };
    case 'tensor':
      return { name, type: TYPES.TENSOR, t: attribute.value };
  }
}
