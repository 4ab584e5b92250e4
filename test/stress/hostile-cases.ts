import { deflateRawSync } from 'node:zlib';
import fc from 'fast-check';
import { zipSync } from 'fflate';
import { NDList, Tensor, encodeNDList, encodeNpy, encodeNpz, encodeSafetensors } from '@kiln/core';

export type Listener = 'inference' | 'management' | 'metrics';

/** One hostile request, sent byte for byte over its own connection. */
export interface HostileCase {
  readonly kind: string;
  readonly listener: Listener;
  /** The whole request as sent: head and body. */
  readonly bytes: Buffer;
  /** HEAD answers carry no body, so their errors cannot be JSON. */
  readonly bodyless?: boolean;
}

/** Everything the storm needs to aim at the running server. */
export interface Target {
  readonly key: string;
  /** Models registered at start (their names may be used, never deleted or scaled). */
  readonly tensorModel: string;
  readonly jsonModel: string;
  readonly imageModel: string;
  readonly maxRequestSize: number;
}

export interface RequestParts {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  /** Skip Content-Length (chunked or deliberately absent). */
  rawFraming?: boolean;
}

export function request(parts: RequestParts): Buffer {
  const headers: Record<string, string> = { host: '127.0.0.1', ...parts.headers };
  if (!parts.rawFraming && parts.body !== undefined)
    headers['content-length'] ??= String(parts.body.length);
  headers.connection = 'close';
  const head =
    `${parts.method} ${parts.path} HTTP/1.1\r\n` +
    Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('') +
    '\r\n';
  return Buffer.concat([Buffer.from(head, 'latin1'), parts.body ?? Buffer.alloc(0)]);
}

const bytes = (max: number) => fc.uint8Array({ maxLength: max }).map((a) => Buffer.from(a));
const dim = fc.oneof(
  fc.nat({ max: 8 }),
  fc.constantFrom(0, 1, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 1e15),
  fc.integer({ min: -5, max: -1 }),
);
const shape = fc.array(dim, { maxLength: 6 });

/** Byte flips and truncation of a valid encoding: the parser must survive anything nearby. */
function mutated(valid: Buffer): fc.Arbitrary<Buffer> {
  return fc
    .record({
      flips: fc.array(
        fc.tuple(fc.nat({ max: valid.length - 1 }), fc.integer({ min: 0, max: 255 })),
        {
          maxLength: 8,
        },
      ),
      cut: fc.option(fc.nat({ max: valid.length }), { nil: undefined }),
    })
    .map(({ flips, cut }) => {
      const copy = Buffer.from(valid);
      for (const [at, value] of flips) copy[at] = value;
      return cut === undefined ? copy : copy.subarray(0, cut);
    });
}

export const goodList = () =>
  NDList.of(
    new Tensor('float32', new Float32Array([1, 2, 3]), [1, 3], 'a'),
    new Tensor('float32', new Float32Array([4, 5, 6]), [1, 3], 'b'),
  );

/** A deflated npy of `n` zero bytes: tiny as sent, `n` bytes inflated. */
function npzBomb(n: number, lieAbout: boolean): Buffer {
  const npy = encodeNpy(new Tensor('uint8', new Uint8Array(n), [n]));
  const zip = Buffer.from(zipSync({ 'a.npy': npy }, { level: 9 }));
  if (lieAbout) {
    // Declare a small size in both headers while the data inflates to n bytes.
    const central = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    zip.writeUInt32LE(100, 22);
    zip.writeUInt32LE(100, central + 24);
  }
  return zip;
}

export function hostileArbitrary(target: Target): fc.Arbitrary<HostileCase> {
  const predict = `/predictions/${target.tensorModel}`;
  const tensorPost = (kind: string, contentType: string) => (body: Buffer) => ({
    kind,
    listener: 'inference' as const,
    bytes: request({
      method: 'POST',
      path: predict,
      headers: { 'content-type': contentType },
      body,
    }),
  });

  const npy = fc
    .oneof(
      mutated(Buffer.from(encodeNpy(goodList().get(0)))),
      fc
        .record({
          descr: fc.oneof(
            fc.constantFrom('<f4', '<i8', '|b1', '<U5', '|S0', '<U0', '>f8', 'O', '<c8'),
            fc.string(),
          ),
          fortran: fc.boolean(),
          shape,
          data: bytes(256),
        })
        .map(({ descr, fortran, shape: s, data }) => {
          const header = `{'descr': '${descr}', 'fortran_order': ${fortran ? 'True' : 'False'}, 'shape': (${s.join(', ')}${s.length === 1 ? ',' : ''}), }`;
          const padded = header.padEnd(Math.ceil((header.length + 11) / 64) * 64 - 10, ' ') + '\n';
          const head = Buffer.alloc(10);
          Buffer.from('\x93NUMPY\x01\x00', 'latin1').copy(head);
          head.writeUInt16LE(padded.length, 8);
          return Buffer.concat([head, Buffer.from(padded, 'latin1'), data]);
        }),
    )
    .map(tensorPost('npy', 'tensor/npy'));

  const npz = fc
    .oneof(
      mutated(Buffer.from(encodeNpz(goodList()))),
      mutated(Buffer.from(encodeNpz(goodList(), { compress: true }))),
      fc.constantFrom(
        npzBomb(32 * 1024 * 1024, false),
        npzBomb(4 * 1024 * 1024, true),
        npzBomb(target.maxRequestSize + 1, false),
      ),
      bytes(512).map((b) => Buffer.concat([Buffer.from('PK\x03\x04', 'latin1'), b])),
    )
    .map(tensorPost('npz', 'tensor/npz'));

  const safetensors = fc
    .oneof(
      mutated(Buffer.from(encodeSafetensors(goodList()))),
      fc
        .record({
          tensors: fc.dictionary(
            fc.string({ maxLength: 8 }),
            fc.record({
              dtype: fc.oneof(
                fc.constantFrom('F32', 'I64', 'BOOL', 'F16', 'BF16', 'U8'),
                fc.string(),
              ),
              shape,
              data_offsets: fc.tuple(
                fc.oneof(fc.nat(), fc.constant(2 ** 40)),
                fc.oneof(fc.nat(), fc.constant(2 ** 40)),
              ),
            }),
            { maxKeys: 4 },
          ),
          declared: fc.option(fc.oneof(fc.nat(), fc.constant(2 ** 40)), { nil: undefined }),
          data: bytes(256),
        })
        .map(({ tensors, declared, data }) => {
          const header = Buffer.from(JSON.stringify(tensors));
          const length = Buffer.alloc(8);
          length.writeBigUInt64LE(BigInt(declared ?? header.length));
          return Buffer.concat([length, header, data]);
        }),
    )
    .map(tensorPost('safetensors', 'tensor/safetensors'));

  const ndlist = fc
    .oneof(mutated(Buffer.from(encodeNDList(goodList()))), bytes(256))
    .map(tensorPost('ndlist', 'tensor/ndlist'));

  const v2Tensor = fc.record({
    name: fc.oneof(fc.constantFrom('a', 'b'), fc.string()),
    shape: fc.oneof(shape, fc.anything()),
    datatype: fc.oneof(
      fc.constantFrom('FP32', 'INT64', 'BYTES', 'BOOL', 'FP16', 'UINT8'),
      fc.string(),
    ),
    data: fc.oneof(
      fc.array(fc.oneof(fc.double(), fc.integer(), fc.string(), fc.boolean()), { maxLength: 16 }),
      fc.anything(),
    ),
  });
  const v2 = fc
    .oneof(
      fc.record({ inputs: fc.array(v2Tensor, { maxLength: 3 }) }).map((r) => ({
        json: JSON.stringify(r),
        extra: Buffer.alloc(0),
        header: undefined as string | undefined,
      })),
      fc
        .json()
        .map((json) => ({ json, extra: Buffer.alloc(0), header: undefined as string | undefined })),
      fc
        .record({
          inputs: fc.array(
            fc.record({
              name: fc.constantFrom('a', 'b'),
              shape,
              datatype: fc.constantFrom('FP32', 'BYTES', 'INT8'),
              parameters: fc.record({
                binary_data_size: fc.oneof(
                  fc.nat({ max: 64 }),
                  fc.constant(2 ** 40),
                  fc.integer({ min: -10, max: -1 }),
                ),
              }),
            }),
            { maxLength: 3 },
          ),
          extra: bytes(96),
          header: fc.oneof(fc.constant('auto'), fc.string({ maxLength: 12 }), fc.nat().map(String)),
        })
        .map(({ inputs, extra, header }) => {
          const json = JSON.stringify({ inputs });
          return {
            json,
            extra,
            header: header === 'auto' ? String(Buffer.byteLength(json)) : header,
          };
        }),
    )
    .map(({ json, extra, header }) => ({
      kind: 'v2',
      listener: 'inference' as const,
      bytes: request({
        method: 'POST',
        path: `/v2/models/${target.tensorModel}/infer`,
        headers: {
          'content-type': header === undefined ? 'application/json' : 'application/octet-stream',
          ...(header === undefined ? {} : { 'inference-header-content-length': header }),
        },
        body: Buffer.concat([Buffer.from(json), extra]),
      }),
    }));

  const multipart = fc
    .record({
      boundary: fc.oneof(
        fc.constant('XyZ'),
        fc.string({ minLength: 1, maxLength: 70 }).filter((s) => !/[\r\n]/.test(s)),
      ),
      parts: fc.array(
        fc.record({
          name: fc.string({ maxLength: 10 }),
          filename: fc.option(fc.string({ maxLength: 10 }), { nil: undefined }),
          type: fc.constantFrom(
            'tensor/npy',
            'tensor/npz',
            'application/json',
            'image/png',
            'text/plain',
          ),
          data: bytes(128),
        }),
        { maxLength: 4 },
      ),
      cut: fc.option(fc.nat({ max: 600 }), { nil: undefined }),
      close: fc.boolean(),
    })
    .map(({ boundary, parts, cut, close }) => {
      const body = Buffer.concat([
        ...parts.map((p) =>
          Buffer.concat([
            Buffer.from(
              `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"${p.filename === undefined ? '' : `; filename="${p.filename}"`}\r\nContent-Type: ${p.type}\r\n\r\n`,
            ),
            p.data,
            Buffer.from('\r\n'),
          ]),
        ),
        Buffer.from(close ? `--${boundary}--\r\n` : ''),
      ]);
      return {
        kind: 'multipart',
        listener: 'inference' as const,
        bytes: request({
          method: 'POST',
          path: predict,
          headers: {
            'content-type': `multipart/form-data; boundary=${boundary.replace(/[^\x20-\x7e]/g, '')}`,
          },
          body: cut === undefined ? body : body.subarray(0, cut),
        }),
      };
    });

  const image = fc
    .oneof(
      fc
        .record({
          w: fc.oneof(fc.nat({ max: 64 }), fc.constantFrom(2 ** 31 - 1, 100_000, 2 ** 32 - 1)),
          h: fc.oneof(fc.nat({ max: 64 }), fc.constantFrom(2 ** 31 - 1, 100_000)),
          depth: fc.constantFrom(1, 8, 16, 3),
          colour: fc.constantFrom(0, 2, 3, 4, 6, 7),
          interlace: fc.constantFrom(0, 1),
          rest: bytes(256),
          compressed: fc.boolean(),
        })
        .map(({ w, h, depth, colour, interlace, rest, compressed }) => {
          const ihdr = Buffer.alloc(13);
          ihdr.writeUInt32BE(w, 0);
          ihdr.writeUInt32BE(h, 4);
          ihdr.writeUInt8(depth, 8);
          ihdr.writeUInt8(colour, 9);
          ihdr.writeUInt8(interlace, 12);
          const chunk = (type: string, data: Buffer) => {
            const length = Buffer.alloc(4);
            length.writeUInt32BE(data.length);
            return Buffer.concat([length, Buffer.from(type, 'latin1'), data, Buffer.alloc(4)]);
          };
          const idat = compressed ? deflateRawSync(Buffer.alloc(65536)) : rest;
          return Buffer.concat([
            Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
            chunk('IHDR', ihdr),
            chunk('IDAT', idat),
            chunk('IEND', Buffer.alloc(0)),
          ]);
        }),
      fc
        .record({ w: fc.nat({ max: 65535 }), h: fc.nat({ max: 65535 }), rest: bytes(512) })
        .map(({ w, h, rest }) => {
          const sof = Buffer.from([
            0xff,
            0xc0,
            0x00,
            0x11,
            0x08,
            h >> 8,
            h & 255,
            w >> 8,
            w & 255,
            0x03,
            1,
            0x22,
            0,
            2,
            0x11,
            1,
            3,
            0x11,
            1,
          ]);
          return Buffer.concat([
            Buffer.from([
              0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0,
            ]),
            sof,
            rest,
          ]);
        }),
      bytes(256),
    )
    .map((body) => ({
      kind: 'image',
      listener: 'inference' as const,
      bytes: request({
        method: 'POST',
        path: `/predictions/${target.imageModel}`,
        headers: { 'content-type': 'image/png' },
        body,
      }),
    }));

  const hostilePath = fc.oneof(
    fc.constantFrom(
      '/predictions/../../etc/passwd',
      '/predictions/..%2F..%2Fetc%2Fpasswd',
      '/predictions/%00',
      '/predictions/%',
      '/predictions/a%ZZ',
      '/v2/models/..%2f/infer',
      '//ping',
      '/models/%2e%2e/x',
      '/metrics/../metrics',
      '*',
      '/ping?x=' + 'a'.repeat(4000),
      '/openapi.json',
      '/v2/health/ready',
    ),
    fc.string({ maxLength: 40 }).map((s) => `/predictions/${encodeURIComponent(s)}`),
    fc.string({ maxLength: 60 }).map((s) => `/${encodeURIComponent(s)}`),
    fc
      .string({ minLength: 200, maxLength: 300 })
      .map((s) => `/predictions/${encodeURIComponent(s)}/x`),
  );
  const method = fc.oneof(
    fc.constantFrom(
      'GET',
      'POST',
      'PUT',
      'DELETE',
      'PATCH',
      'OPTIONS',
      'HEAD',
      'TRACE',
      'PROPFIND',
      'M-SEARCH',
    ),
    fc.stringMatching(/^[A-Z]{1,12}$/),
  );
  const routes = fc
    .record({
      listener: fc.constantFrom<Listener>('inference', 'management', 'metrics'),
      method,
      path: hostilePath,
      host: fc.oneof(
        fc.constant('127.0.0.1'),
        fc.constantFrom('evil.example', 'localhost:1', '[::1]', ''),
      ),
      origin: fc.option(fc.constantFrom('http://evil.example', 'null', 'http://127.0.0.1'), {
        nil: undefined,
      }),
      body: fc.option(bytes(64), { nil: undefined }),
    })
    .map(({ listener, method: m, path, host, origin, body }) => ({
      kind: 'route',
      listener,
      bodyless: m === 'HEAD',
      bytes: request({
        method: m,
        path,
        headers: { host, ...(origin ? { origin } : {}) },
        ...(body ? { body } : {}),
      }),
    }));

  const hostileUrl = fc.oneof(
    fc.constantFrom(
      '/etc/passwd',
      '../../etc',
      'file:///etc/passwd',
      'http://169.254.169.254/latest',
      's3://bucket/m',
      'https://evil.example/m.zip',
      '%00',
      '',
      'x=y=z',
      'a:b:c:d:e=/etc',
    ),
    fc.string({ maxLength: 40 }),
  );
  const management = fc
    .record({
      withKey: fc.boolean(),
      call: fc.oneof(
        hostileUrl.map((url) => ({
          method: 'POST',
          path: `/models?url=${encodeURIComponent(url)}&model_name=x`,
        })),
        fc
          .record({
            n: fc.oneof(fc.nat(), fc.constant(100_000)),
            name: fc.string({ maxLength: 12 }),
          })
          .map(({ n, name }) => ({
            method: 'PUT',
            path: `/models/x-${encodeURIComponent(name)}?max_worker=${n}&min_worker=${n}`,
          })),
        fc
          .string({ maxLength: 12 })
          .map((name) => ({ method: 'DELETE', path: `/models/x-${encodeURIComponent(name)}` })),
        fc.constantFrom(
          { method: 'GET', path: '/models?limit=-1' },
          { method: 'GET', path: '/models?limit=99999999999999999999' },
          { method: 'GET', path: '/models?next_page_token=abc' },
          { method: 'GET', path: `/models/${target.tensorModel}` },
          { method: 'PUT', path: `/models/${target.tensorModel}?max_worker=100000` },
          { method: 'PUT', path: `/models/${target.tensorModel}/nosuch/set-default` },
          { method: 'POST', path: '/models?url=a&url=b' },
        ),
      ),
    })
    .map(({ withKey, call }) => ({
      kind: 'management',
      listener: 'management' as const,
      bytes: request({
        ...call,
        headers: withKey ? { authorization: `Bearer ${target.key}` } : {},
      }),
    }));

  const framing = fc
    .oneof(
      bytes(200),
      fc.constantFrom(
        `POST ${predict} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nabc`,
        `POST ${predict} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n`,
        `POST ${predict} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc`,
        `POST ${predict} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab`,
        `POST ${predict} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n`,
        `POST ${predict} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999999999999\r\n\r\n`,
        `POST ${predict} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\nshort`,
        `GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX: ${'a'.repeat(40_000)}\r\n\r\n`,
        `GET /${'a'.repeat(70_000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
        'GET /ping\r\n\r\n',
        'GET /ping HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n',
        'GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n',
        'GET /ping HTTP/1.1\nHost: 127.0.0.1\n\n',
        `GET /ping HTTP/1.1\r\n${Array.from({ length: 3000 }, (_, i) => `X-${i}: y\r\n`).join('')}\r\n`,
      ),
      fc
        .record({ size: fc.stringMatching(/^[0-9a-fA-F]{1,20}$/), data: bytes(64) })
        .map(({ size, data }) =>
          Buffer.concat([
            Buffer.from(
              `POST ${predict} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: tensor/npy\r\nTransfer-Encoding: chunked\r\n\r\n${size}\r\n`,
            ),
            data,
            Buffer.from('\r\n0\r\n\r\n'),
          ]),
        ),
    )
    .map((raw) => ({
      kind: 'framing',
      listener: 'inference' as const,
      bytes: Buffer.isBuffer(raw) ? raw : Buffer.from(raw, 'latin1'),
    }));

  return fc.oneof(
    { arbitrary: npy, weight: 2 },
    { arbitrary: npz, weight: 2 },
    { arbitrary: safetensors, weight: 2 },
    { arbitrary: ndlist, weight: 1 },
    { arbitrary: v2, weight: 2 },
    { arbitrary: multipart, weight: 2 },
    { arbitrary: image, weight: 2 },
    { arbitrary: routes, weight: 3 },
    { arbitrary: management, weight: 2 },
    { arbitrary: framing, weight: 1 },
  );
}

/** The request whose answer is checked between hostile ones, and the answer it must get. */
export function validRequest(target: Target): { bytes: Buffer; expected: unknown } {
  return {
    bytes: request({
      method: 'POST',
      path: `/predictions/${target.tensorModel}`,
      headers: { accept: 'application/json' },
      body: Buffer.from(encodeNpz(goodList())),
    }),
    expected: [
      { name: 'sum', datatype: 'FP32', shape: [1, 3], data: [5, 7, 9] },
      { name: 'product', datatype: 'FP32', shape: [1, 3], data: [4, 10, 18] },
    ],
  };
}
