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

/** Tensor data starts at a multiple of this many bytes from the frame's first byte. */
export const TENSOR_ALIGNMENT = 8;

/**
 * Encodes one frame, length prefix included, as the list of buffers to write in order:
 * headers are small new buffers, tensor and byte contents are views of the caller's memory
 * (nothing large is copied; a writev sends them together). Tensor data is padded to start at a
 * multiple of TENSOR_ALIGNMENT bytes from the frame's start, so the reader can view it in place.
 */
export function encodeFrameParts(frame: Frame): Buffer[] {
  const props = Buffer.from(JSON.stringify(frame.properties));
  const head = Buffer.alloc(4 + 9 + props.length + 2);
  head.writeUInt32LE(frame.id, 4);
  head.writeUInt8(frame.kind, 8);
  head.writeUInt32LE(props.length, 9);
  props.copy(head, 13);
  head.writeUInt16LE(frame.contents.length, 13 + props.length);
  const parts: Buffer[] = [head];
  let position = head.length;
  for (const content of frame.contents) {
    const name = Buffer.from(content.name);
    const dtype = Buffer.from(content.dtype ? (NUMPY_NAMES[content.dtype] ?? content.dtype) : '');
    const shape = content.dtype ? (content.shape ?? []) : [];
    const fixed = 2 + name.length + 1 + dtype.length + 1 + 8 * shape.length + 8;
    const pad = content.dtype ? padding(position + fixed) : 0;
    const meta = Buffer.alloc(fixed + pad);
    let offset = meta.writeUInt16LE(name.length, 0);
    offset += name.copy(meta, offset);
    offset = meta.writeUInt8(dtype.length, offset);
    offset += dtype.copy(meta, offset);
    offset = meta.writeUInt8(shape.length, offset);
    for (const dim of shape) offset = meta.writeBigInt64LE(BigInt(dim), offset);
    meta.writeBigUInt64LE(BigInt(content.bytes.byteLength), offset);
    parts.push(meta);
    if (content.bytes.byteLength > 0) {
      parts.push(
        Buffer.from(content.bytes.buffer, content.bytes.byteOffset, content.bytes.byteLength),
      );
    }
    position += meta.length + content.bytes.byteLength;
  }
  head.writeUInt32LE(position - 4, 0);
  return parts;
}

/** Encodes one frame into one buffer, length prefix included. */
export function encodeFrame(frame: Frame): Buffer {
  return Buffer.concat(encodeFrameParts(frame));
}

function padding(position: number): number {
  return (TENSOR_ALIGNMENT - (position % TENSOR_ALIGNMENT)) % TENSOR_ALIGNMENT;
}

/**
 * Decodes a frame body (without its length prefix; its 4 bytes precede `body` in the frame).
 * Contents are views of `body`'s memory where tensor data is aligned there, copies otherwise.
 */
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
      if (dtypeName) offset += padding(offset + 4);
      if (offset + size > body.length) throw new RangeError('content runs past the frame');
      const start = body.byteOffset + offset;
      let bytes: Uint8Array;
      if (!dtypeName || start % TENSOR_ALIGNMENT === 0) {
        bytes = new Uint8Array(body.buffer, start, size);
      } else {
        // Typed arrays need aligned storage: copy the rare unaligned tensor.
        bytes = new Uint8Array(size);
        bytes.set(body.subarray(offset, offset + size));
      }
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
