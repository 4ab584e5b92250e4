import { KilnError, KilnErrorCode, isDType, type DType } from '@kiln/core';

/** Frame kinds shared with python/kiln_python/worker.py. */
export const FrameKind = { Call: 0, Result: 1, Error: 2 } as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

/** A named content: raw bytes, or a tensor (dtype + shape + raw little-endian elements). */
export interface Content {
  readonly name: string;
  readonly bytes: Uint8Array;
  readonly dtype?: DType;
  readonly shape?: readonly number[];
}

export interface Frame {
  readonly id: number;
  readonly kind: FrameKind;
  readonly properties: Record<string, unknown>;
  readonly contents: readonly Content[];
}

// numpy spells bool/float types the same as Kiln except these.
const NUMPY_NAMES: Partial<Record<DType, string>> = {};

/** Encodes one frame, length prefix included; tensor bytes are copied once, never re-encoded. */
export function encodeFrame(frame: Frame): Buffer {
  const props = Buffer.from(JSON.stringify(frame.properties));
  const parts: Buffer[] = [];
  const head = Buffer.alloc(4 + 9);
  head.writeUInt32LE(frame.id, 4);
  head.writeUInt8(frame.kind, 8);
  head.writeUInt32LE(props.length, 9);
  parts.push(head, props);
  const count = Buffer.alloc(2);
  count.writeUInt16LE(frame.contents.length);
  parts.push(count);
  for (const content of frame.contents) {
    const name = Buffer.from(content.name);
    const dtype = Buffer.from(content.dtype ? (NUMPY_NAMES[content.dtype] ?? content.dtype) : '');
    const shape = content.dtype ? (content.shape ?? []) : [];
    const meta = Buffer.alloc(2 + name.length + 1 + dtype.length + 1 + 8 * shape.length + 8);
    let offset = meta.writeUInt16LE(name.length, 0);
    offset += name.copy(meta, offset);
    offset = meta.writeUInt8(dtype.length, offset);
    offset += dtype.copy(meta, offset);
    offset = meta.writeUInt8(shape.length, offset);
    for (const dim of shape) offset = meta.writeBigInt64LE(BigInt(dim), offset);
    meta.writeBigUInt64LE(BigInt(content.bytes.byteLength), offset);
    parts.push(
      meta,
      Buffer.from(content.bytes.buffer, content.bytes.byteOffset, content.bytes.byteLength),
    );
  }
  const out = Buffer.concat(parts);
  out.writeUInt32LE(out.length - 4, 0);
  return out;
}

/** Decodes a frame body (without its length prefix). */
export function decodeFrame(body: Buffer): Frame {
  try {
    const id = body.readUInt32LE(0);
    const kind = body.readUInt8(4) as FrameKind;
    const propsLength = body.readUInt32LE(5);
    let offset = 9;
    const properties = JSON.parse(
      body.toString('utf8', offset, offset + propsLength) || '{}',
    ) as Record<string, unknown>;
    offset += propsLength;
    const count = body.readUInt16LE(offset);
    offset += 2;
    const contents: Content[] = [];
    for (let i = 0; i < count; i++) {
      const nameLength = body.readUInt16LE(offset);
      offset += 2;
      const name = body.toString('utf8', offset, offset + nameLength);
      offset += nameLength;
      const dtypeLength = body.readUInt8(offset);
      offset += 1;
      const dtypeName = body.toString('utf8', offset, offset + dtypeLength);
      offset += dtypeLength;
      const rank = body.readUInt8(offset);
      offset += 1;
      const shape: number[] = [];
      for (let d = 0; d < rank; d++, offset += 8) shape.push(Number(body.readBigInt64LE(offset)));
      const size = Number(body.readBigUInt64LE(offset));
      offset += 8;
      if (offset + size > body.length) throw new RangeError('content runs past the frame');
      // Copy so the tensor owns aligned storage independent of the read buffer.
      const bytes = new Uint8Array(size);
      bytes.set(body.subarray(offset, offset + size));
      offset += size;
      contents.push(
        dtypeName ? { name, bytes, dtype: toDType(dtypeName), shape } : { name, bytes },
      );
    }
    return { id, kind, properties, contents };
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.EngineError,
      'malformed frame from the Python worker',
    );
  }
}

function toDType(name: string): DType {
  if (isDType(name) && name !== 'string') return name;
  throw new KilnError(
    KilnErrorCode.UnsupportedDType,
    `Python returned an unsupported dtype ${name}`,
  );
}

/** Splits a byte stream into frame bodies; a large frame is joined once, not per chunk. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private needed = 4;

  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const bodies: Buffer[] = [];
    while (this.buffered >= this.needed) {
      const data = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      const length = data.readUInt32LE(0);
      if (data.length < 4 + length) {
        this.chunks = [data];
        this.needed = 4 + length;
        break;
      }
      bodies.push(data.subarray(4, 4 + length));
      const rest = data.subarray(4 + length);
      this.chunks = rest.length ? [rest] : [];
      this.buffered = rest.length;
      this.needed = 4;
    }
    return bodies;
  }
}
