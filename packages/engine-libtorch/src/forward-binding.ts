import {
  type AnyTensor,
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  type TensorDescriptor,
  checkInput,
  hasRealName,
} from '@kiln/core';
import type { ArgumentDescription, NativeValue } from '@kiln/libtorch-native';
import { fromHostTensor, isHostTensor, toHostTensor } from './tensor-bridge.js';

/**
 * Binds an NDList to forward's arguments:
 * - one argument typed Dict[str, …]: the tensors by name;
 * - one argument typed Tuple[…] or List[…]: all tensors, in order;
 * - otherwise by name when every tensor is named after an argument, else by position — core's
 *   rule, where numpy's placeholder names (`arr_0`) count as no name.
 * Inputs the model declares in a stored signature are checked first (dtype, shape) by core's
 * checkInput, so a wrong input is an INVALID_INPUT/SHAPE_MISMATCH, not an engine failure.
 */
export function forwardArguments(
  input: NDList,
  params: readonly ArgumentDescription[],
  declared: readonly TensorDescriptor[] | undefined,
): NativeValue[] {
  const [only] = params;
  if (params.length === 1 && only && /^Dict\[/.test(only.type)) {
    const dict: Record<string, NativeValue> = {};
    input.tensors.forEach((tensor, i) => {
      const name = tensor.name ?? declared?.[i]?.name;
      if (name === undefined) {
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `${only.name} is a dict: every input tensor needs a name`,
        );
      }
      dict[name] = checked(
        tensor,
        declared?.find((d) => d.name === name),
        name,
      );
    });
    return [dict];
  }
  if (params.length === 1 && only && /^(Tuple|List)\[/.test(only.type)) {
    return [input.tensors.map((t, i) => checked(t, declared?.[i], t.name ?? `${only.name}[${i}]`))];
  }
  const names = new Set(params.map((p) => p.name));
  const byName =
    input.length > 0 && input.tensors.every((t) => hasRealName(t, declared) && names.has(t.name));
  if (!byName) {
    const unknown = input.tensors.find(
      (t) =>
        hasRealName(t, declared) && declared?.length && !declared.some((d) => d.name === t.name),
    );
    if (unknown) throw unknownInput(unknown.name!, params);
    if (input.length > params.length) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `the model takes ${params.length} inputs (${list(params)}), got ${input.length}`,
      );
    }
    return input.tensors.map((t, i) => checked(t, declared?.[i], params[i]!.name));
  }
  const args: NativeValue[] = [];
  const provided = params.map((p) => input.find(p.name));
  const last = provided.reduce((end, t, i) => (t ? i + 1 : end), 0);
  for (let i = 0; i < last; i++) {
    const param = params[i]!;
    const tensor = provided[i];
    if (!tensor)
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `input ${param.name} is missing (the model takes ${list(params)})`,
      );
    args.push(
      checked(
        tensor,
        declared?.find((d) => d.name === param.name),
        param.name,
      ),
    );
  }
  const missing = params.slice(last).find((p) => !p.hasDefault);
  if (missing)
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `input ${missing.name} is missing (the model takes ${list(params)})`,
    );
  return args;
}

function checked(
  tensor: AnyTensor,
  declared: TensorDescriptor | undefined,
  what: string,
): NativeValue {
  if (declared) checkInput(tensor, declared);
  return toHostTensor(tensor, `input ${what}`);
}

function unknownInput(name: string, params: readonly ArgumentDescription[]): KilnError {
  return new KilnError(
    KilnErrorCode.InvalidInput,
    `the model has no input named ${name} (it takes ${list(params)})`,
  );
}

function list(params: readonly ArgumentDescription[]): string {
  return params.map((p) => p.name).join(', ') || 'no inputs';
}

/**
 * Flattens forward's result into an NDList, depth first: dict values are named by their keys
 * (nested ones `key.sub`), tuple and list items are unnamed; scalars become 0-d tensors and
 * None is skipped. Unnamed tensors then take the declared output names by position when the
 * counts agree.
 */
export function flattenOutputs(
  value: NativeValue,
  declared: readonly TensorDescriptor[] | undefined,
): NDList {
  const tensors: AnyTensor[] = [];
  const walk = (item: NativeValue, name: string | undefined): void => {
    if (item === null) return;
    if (isHostTensor(item)) {
      tensors.push(fromHostTensor(item, name));
    } else if (Array.isArray(item)) {
      item.forEach((child: NativeValue, i: number) =>
        walk(child, name === undefined ? undefined : `${name}.${i}`),
      );
    } else if (typeof item === 'number') {
      tensors.push(new Tensor('float64', Float64Array.of(item), [], name));
    } else if (typeof item === 'bigint') {
      tensors.push(new Tensor('int64', BigInt64Array.of(item), [], name));
    } else if (typeof item === 'boolean') {
      tensors.push(new Tensor('bool', Uint8Array.of(item ? 1 : 0), [], name));
    } else if (typeof item === 'string') {
      tensors.push(new Tensor('string', [item], [], name));
    } else if (typeof item === 'object' && !('toHost' in item)) {
      for (const [key, child] of Object.entries(item as Record<string, NativeValue>)) {
        walk(child, name === undefined ? key : `${name}.${key}`);
      }
    } else {
      throw new KilnError(KilnErrorCode.Internal, 'a native tensor reached host output flattening');
    }
  };
  walk(value, undefined);
  if (declared && declared.length === tensors.length) {
    return new NDList(
      tensors.map((t, i) => (t.name === undefined ? t.withName(declared[i]!.name) : t)),
    );
  }
  return new NDList(tensors);
}
