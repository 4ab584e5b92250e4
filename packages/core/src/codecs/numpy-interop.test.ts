import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DTYPES, type DType, dtypeNames } from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import { toFloat16BitsArray } from './float16.js';
import { decodeNpy, encodeNpy } from './npy.js';
import { decodeNDList } from './ndlist.js';
import { decodeNpz, encodeNpz } from './npz.js';

const PYTHON = '/usr/bin/python3';

function numpyUnavailable(): string | undefined {
  const probe = spawnSync(PYTHON, ['-c', 'import numpy'], { encoding: 'utf8', timeout: 30_000 });
  if (probe.error) return `${PYTHON} cannot run (${probe.error.message})`;
  if (probe.status !== 0) {
    return `numpy does not import under ${PYTHON}: ${probe.stderr.trim().split('\n').pop()}`;
  }
  return undefined;
}

const skipReason = numpyUnavailable();
if (skipReason) console.log(`skipping the numpy cross-check: ${skipReason}`);

/** How a Python script reports an array: shape, and little-endian C-order bytes or strings. */
interface Described {
  name?: string;
  shape: number[];
  dtype?: string;
  hex?: string;
  strings?: string[];
  identical?: boolean;
}

const DESCRIBE = String.raw`
import io, json, os, sys, zipfile
import numpy as np

def describe(a):
    if a.dtype.kind in 'US':
        values = [x.decode('utf-8') if isinstance(x, bytes) else x for x in a.flatten(order='C').tolist()]
        return {'shape': list(a.shape), 'strings': values}
    le = np.ascontiguousarray(a.astype(a.dtype.newbyteorder('<')))
    return {'shape': list(a.shape), 'dtype': le.dtype.str, 'hex': le.tobytes().hex()}
`;

function python(script: string, dir: string): unknown {
  const run = spawnSync(PYTHON, ['-c', DESCRIBE + script, dir], {
    encoding: 'utf8',
    timeout: 60_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (run.status !== 0) throw new Error(`python failed: ${run.error?.message ?? run.stderr}`);
  return JSON.parse(run.stdout);
}

function numpyDType(descr: string): DType {
  const code = descr.slice(1);
  const dtype = DTYPES.find((candidate) => dtypeNames(candidate).numpy === code);
  if (!dtype) throw new Error(`no Kiln dtype for ${descr}`);
  return dtype;
}

function expectMatches(tensor: AnyTensor, described: Described): void {
  expect(tensor.shape).toEqual(described.shape);
  if (described.strings) {
    expect(tensor.dtype).toBe('string');
    expect(tensor.data).toEqual(described.strings);
  } else {
    expect(tensor.dtype).toBe(numpyDType(described.dtype!));
    expect(Buffer.from(tensor.bytes()).toString('hex')).toBe(described.hex);
  }
}

describe.skipIf(skipReason !== undefined)('numpy cross-check', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-npy-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the .npy and .npz files numpy writes', () => {
    const cases = python(
      String.raw`
out = sys.argv[1]
cases = {}
def add(name, a):
    np.save(os.path.join(out, name + '.npy'), a)
    cases[name] = describe(a)
for code in ['b1', 'i1', 'i2', 'i4', 'i8', 'u1', 'u2', 'u4', 'u8']:
    add(code, (np.arange(12) * 37 % 256 > 100) if code == 'b1' else (np.arange(12) * 37).astype(code).reshape(3, 4))
for code in ['f2', 'f4', 'f8']:
    add(code, np.array([-3.25, 0.1, np.nan, np.inf, -np.inf, -0.0], dtype=code).reshape(2, 3))
add('i8-extremes', np.array([np.iinfo('i8').min, np.iinfo('i8').max, 0], dtype='i8'))
add('u8-max', np.array([np.iinfo('u8').max], dtype='u8'))
add('scalar', np.array(3.5, dtype='f4'))
add('empty-0x3', np.zeros((0, 3), dtype='f8'))
add('empty-2x0x5', np.zeros((2, 0, 5), dtype='i2'))
add('fortran-3d', np.asfortranarray(np.arange(24, dtype='i4').reshape(2, 3, 4)))
add('fortran-strings', np.asfortranarray(np.array([['a', 'bb'], ['ccc', 'd']])))
add('big-i4', np.arange(6, dtype='>i4').reshape(2, 3))
add('big-f8', np.linspace(0, 1, 5).astype('>f8'))
add('big-f2', np.array([1.5, -2], dtype='>f2'))
add('big-u8', np.arange(3, dtype='>u8') * (2 ** 62))
add('big-unicode', np.array(['xy', 'z'], dtype='>U2'))
add('unicode', np.array(['', 'héllo', '😀x', 'a\0b']))
add('bytes', np.array([b'abc', b'', 'é'.encode()], dtype='S4'))
x, y, z = np.arange(4, dtype='u2'), np.array(['p', 'qr']), np.eye(2, dtype='f4')
np.savez(os.path.join(out, 'stored.npz'), x, y, named=z)
np.savez_compressed(os.path.join(out, 'deflated.npz'), x, y, named=z)
for archive in ['stored', 'deflated']:
    arrays = {'arr_0': x, 'arr_1': y, 'named': z}
    names = [entry[:-4] for entry in zipfile.ZipFile(os.path.join(out, archive + '.npz')).namelist()]
    cases[archive] = [dict(describe(arrays[name]), name=name) for name in names]
print(json.dumps(cases))
`,
      dir,
    ) as Record<string, Described | Described[]>;
    let checked = 0;
    for (const [name, described] of Object.entries(cases)) {
      if (Array.isArray(described)) {
        const list = decodeNpz(readFileSync(join(dir, `${name}.npz`)));
        expect(list.names).toEqual(described.map((d) => d.name));
        described.forEach((d, i) => expectMatches(list.get(i), d));
      } else {
        expectMatches(decodeNpy(readFileSync(join(dir, `${name}.npy`))), described);
      }
      checked++;
    }
    expect(checked).toBe(28);
  });

  it('writes .npy and .npz files numpy reads, byte for byte as numpy would write them', () => {
    const tensors: Record<string, AnyTensor> = {
      bool: new Tensor('bool', Uint8Array.of(1, 0, 1), [3]),
      int8: new Tensor('int8', Int8Array.of(-128, 127), [2, 1]),
      int16: new Tensor('int16', Int16Array.of(-2, 3), [2]),
      int32: new Tensor('int32', Int32Array.of(-5), []),
      int64: new Tensor('int64', BigInt64Array.of(-(2n ** 63n), 2n ** 63n - 1n), [1, 2]),
      uint8: new Tensor('uint8', Uint8Array.of(0, 255), [2]),
      uint16: new Tensor('uint16', Uint16Array.of(65535), [1]),
      uint32: new Tensor('uint32', Uint32Array.of(4294967295), [1]),
      uint64: new Tensor('uint64', BigUint64Array.of(2n ** 64n - 1n), [1]),
      float16: new Tensor('float16', toFloat16BitsArray([1.5, -0, Infinity]), [3]),
      float32: new Tensor('float32', Float32Array.of(0.1, NaN), [2]),
      float64: new Tensor('float64', Float64Array.of(Math.PI), [1, 1, 1]),
      strings: new Tensor('string', ['', 'héllo', '😀x', 'a\0b'], [2, 2]),
      empty: new Tensor('float32', new Float32Array(0), [2, 0, 5]),
      long: new Tensor('uint8', new Uint8Array(10 ** 6), [10 ** 6]),
    };
    for (const [name, tensor] of Object.entries(tensors))
      writeFileSync(join(dir, `ours-${name}.npy`), encodeNpy(tensor));
    const list = NDList.of(tensors.int16!, tensors.strings!.withName('words'), tensors.float16!);
    writeFileSync(join(dir, 'ours-stored.npz'), encodeNpz(list));
    writeFileSync(join(dir, 'ours-deflated.npz'), encodeNpz(list, { compress: true }));

    const seen = python(
      String.raw`
out = sys.argv[1]
result = {}
for file in sorted(os.listdir(out)):
    path = os.path.join(out, file)
    if not file.startswith('ours-'):
        continue
    if file.endswith('.npy'):
        a = np.load(path)
        again = io.BytesIO()
        np.save(again, a)
        result[file] = dict(describe(a), identical=again.getvalue() == open(path, 'rb').read())
    else:
        with np.load(path) as archive:
            result[file] = [dict(describe(archive[key]), name=key) for key in archive.files]
print(json.dumps(result))
`,
      dir,
    ) as Record<string, Described | Described[]>;

    for (const [name, tensor] of Object.entries(tensors)) {
      const described = seen[`ours-${name}.npy`] as Described;
      expectMatches(tensor, described);
      expect(described.identical, `${name} differs from numpy's own bytes`).toBe(true);
    }
    for (const archive of ['ours-stored.npz', 'ours-deflated.npz']) {
      const described = seen[archive] as Described[];
      expect(described.map((d) => d.name)).toEqual(['arr_0', 'words', 'arr_1']);
      described.forEach((d, i) => expectMatches(list.get(i), d));
    }
  });

  it("reads ndlist bytes written the way DJL's Python encoder writes them", () => {
    // djl_python's to_nd_list: version 3, no name, sparse format "default" (Java writes
    // DENSE), numpy's dtype name upper-cased (BOOL, where Java writes BOOLEAN), a '?' layout
    // char per dimension, '<' data.
    const written = python(
      String.raw`
import struct
def s(text):
    return struct.pack('>h', len(text)) + text.encode('utf8')
arrays = [np.arange(6, dtype='float32').reshape(2, 3) / 4, np.array([[7, -8]], dtype='int64'),
          np.array([True, False])]
out = bytearray(struct.pack('>i', len(arrays)))
for a in arrays:
    out += s('NDAR') + struct.pack('>i', 3) + bytes([0]) + s('default') + s(str(a.dtype).upper())
    out += struct.pack('>i', a.ndim) + b''.join(struct.pack('>q', d) for d in a.shape)
    out += struct.pack('>i', a.ndim) + b''.join(struct.pack('>h', ord('?')) for _ in a.shape)
    data = a.astype(a.dtype.newbyteorder('<')).tobytes('C')
    out += bytes([ord('<')]) + struct.pack('>i', len(data)) + data
print(json.dumps({'hex': out.hex(), 'arrays': [describe(a) for a in arrays]}))
`,
      dir,
    ) as { hex: string; arrays: Described[] };
    const list = decodeNDList(Uint8Array.from(Buffer.from(written.hex, 'hex')));
    expect(list.length).toBe(3);
    expect(list.get(2).dtype).toBe('bool');
    list.tensors.forEach((tensor, i) => {
      expect(tensor.name).toBeUndefined();
      expectMatches(tensor, written.arrays[i]!);
    });
  });
});
