import { KilnError, KilnErrorCode, isDType, type DType } from '@kiln/core';

/**
 * Frame kinds shared with python/kiln_python/worker.py. A streamed answer comes as chunks (the
 * first with the answer's properties) before its result; the worker waits for an ack of each
 * chunk before it produces the next.
 */
export const FrameKind = { Call: 0, Result: 1, Error: 2, Chunk: 3, Ack: 4 } as const;
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

/**
 * Properties to encode: an object, or the text of one as JSON (a batch's, written straight
 * from its requests' metas: gathering dozens of prefixed keys into an object costs more than
 * the rest of the frame).
 */
export type FrameProperties = Record<string, unknown> | string;

/** A frame to send: its properties may already be JSON text. */
export type OutgoingFrame = Omit<Frame, 'properties'> & { readonly properties: FrameProperties };

// numpy spells bool/float types the same as Kiln except these.
const NUMPY_NAMES: Partial<Record<DType, string>> = {};

/**
 * Set on a call's kind byte when its contents may live in the worker's shared input region:
 * every content header then carries a location byte after its size — 0: the bytes follow,
 * 1: a u64 offset into the region follows, and no bytes.
 */
export const SHARED_CONTENTS_FLAG = 0x80;

/**
 * Set on a call's kind byte when the worker may put its answer's large contents in the shared
 * output region: Node has no other call in flight, so it reads that answer before it could
 * send another call whose answer would overwrite it.
 */
export const ANSWER_IN_REGION_FLAG = 0x40;

/** Tensor data starts at a multiple of this many bytes from the frame's first byte. */
export const TENSOR_ALIGNMENT = 8;

/**
 * Contents up to this size are copied into the frame's header buffer, so a small frame leaves
 * as one buffer (one write); larger ones are sent from the caller's memory.
 */
const INLINE_BYTES = 16 * 1024;

/** The header of one content: name, dtype, shape and byte length, padding included. */
interface ContentMeta {
  readonly name: string;
  readonly dtype: string;
  readonly shape: readonly number[];
  /** Zero bytes after the header that align tensor data. */
  readonly pad: number;
  readonly size: number;
  readonly inline: boolean;
  /** Where the content sits in the shared input region, when it is there. */
  readonly sharedAt: number | undefined;
}

/**
 * Encodes one frame, length prefix included, as the list of buffers to write in order:
 * headers (and small contents) share one new buffer; large contents are views of the caller's
 * memory (nothing large is copied; a writev sends them together). Tensor data is padded to start
 * at a multiple of TENSOR_ALIGNMENT bytes from the frame's start, so the reader can view it in
 * place. `shared` gives, by content index, the offsets of contents already copied into the
 * worker's shared input region (SharedRegion): those travel as references.
 */
export function encodeFrameParts(
  frame: OutgoingFrame,
  shared?: ReadonlyMap<number, number>,
  answerInRegion = false,
): Buffer[] {
  const located = shared !== undefined && shared.size > 0;
  const props =
    typeof frame.properties === 'string' ? frame.properties : JSON.stringify(frame.properties);
  const propsLength = Buffer.byteLength(props);
  const metas: ContentMeta[] = [];
  // First pass: where every content starts, so all headers go into one allocation.
  let position = 4 + 9 + propsLength + 2;
  let ownBytes = position;
  frame.contents.forEach((content, index) => {
    const name = content.name;
    const dtype = content.dtype ? (NUMPY_NAMES[content.dtype] ?? content.dtype) : '';
    const shape = content.dtype ? (content.shape ?? []) : [];
    const sharedAt = shared?.get(index);
    const location = located ? (sharedAt === undefined ? 1 : 9) : 0;
    const fixed =
      2 + Buffer.byteLength(name) + 1 + dtype.length + 1 + 8 * shape.length + 8 + location;
    const size = content.bytes.byteLength;
    const carried = sharedAt === undefined ? size : 0;
    const pad = dtype && sharedAt === undefined ? padding(position + fixed) : 0;
    const inline = carried <= INLINE_BYTES;
    metas.push({ name, dtype, shape, pad, size, inline, sharedAt });
    ownBytes += fixed + pad + (inline ? carried : 0);
    position += fixed + pad + carried;
  });
  const own = Buffer.allocUnsafe(ownBytes);
  own.writeUInt32LE(position - 4, 0);
  own.writeUInt32LE(frame.id, 4);
  own.writeUInt8(
    frame.kind |
      (located ? SHARED_CONTENTS_FLAG : 0) |
      (answerInRegion ? ANSWER_IN_REGION_FLAG : 0),
    8,
  );
  own.writeUInt32LE(propsLength, 9);
  let offset = 13 + own.write(props, 13);
  offset = own.writeUInt16LE(frame.contents.length, offset);
  const parts: Buffer[] = [];
  let partStart = 0;
  frame.contents.forEach((content, i) => {
    const meta = metas[i]!;
    offset = own.writeUInt16LE(Buffer.byteLength(meta.name), offset);
    offset += own.write(meta.name, offset);
    offset = own.writeUInt8(meta.dtype.length, offset);
    offset += own.write(meta.dtype, offset, 'latin1');
    offset = own.writeUInt8(meta.shape.length, offset);
    for (const dim of meta.shape) offset = writeInt64(own, dim, offset);
    offset = writeInt64(own, meta.size, offset);
    if (located) offset = own.writeUInt8(meta.sharedAt === undefined ? 0 : 1, offset);
    if (meta.sharedAt !== undefined) {
      offset = writeInt64(own, meta.sharedAt, offset);
      return;
    }
    own.fill(0, offset, offset + meta.pad);
    offset += meta.pad;
    const bytes = content.bytes;
    if (meta.inline) {
      own.set(bytes, offset);
      offset += meta.size;
    } else {
      parts.push(own.subarray(partStart, offset));
      parts.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      partStart = offset;
    }
  });
  if (partStart < own.length || parts.length === 0) parts.push(own.subarray(partStart));
  return parts;
}

/** Encodes one frame into one buffer, length prefix included. */
export function encodeFrame(frame: OutgoingFrame): Buffer {
  const parts = encodeFrameParts(frame);
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

function padding(position: number): number {
  return (TENSOR_ALIGNMENT - (position % TENSOR_ALIGNMENT)) % TENSOR_ALIGNMENT;
}

// Shapes and sizes are i64/u64 on the wire; BigInt would cost more than the whole header.
function writeInt64(buffer: Buffer, value: number, offset: number): number {
  const high = Math.floor(value / 2 ** 32);
  buffer.writeUInt32LE(value - high * 2 ** 32, offset);
  return buffer.writeInt32LE(high, offset + 4);
}

function readInt64(buffer: Buffer, offset: number): number {
  return buffer.readUInt32LE(offset) + buffer.readInt32LE(offset + 4) * 2 ** 32;
}

/** Reads `size` bytes at `offset` of the shared output region, as a copy. */
export type RegionReader = (offset: number, size: number) => Uint8Array;

/**
 * Decodes a frame body (without its length prefix; its 4 bytes precede `body` in the frame).
 * Contents are views of `body`'s memory where tensor data is aligned there, copies otherwise;
 * contents the worker put in the shared output region are copied out through `region`.
 */
export function decodeFrame(body: Buffer, region?: RegionReader): Frame {
  try {
    const id = body.readUInt32LE(0);
    const kindByte = body.readUInt8(4);
    const located = (kindByte & SHARED_CONTENTS_FLAG) !== 0;
    if (located && !region)
      throw new RangeError('an answer refers to shared memory there is none of');
    const kind = (kindByte & ~(SHARED_CONTENTS_FLAG | ANSWER_IN_REGION_FLAG)) as FrameKind;
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
      for (let d = 0; d < rank; d++, offset += 8) shape.push(readInt64(body, offset));
      const size = readInt64(body, offset);
      offset += 8;
      if (located && body.readUInt8(offset++) === 1) {
        const at = readInt64(body, offset);
        offset += 8;
        const bytes = region!(at, size);
        contents.push(
          dtypeName ? { name, bytes, dtype: toDType(dtypeName), shape } : { name, bytes },
        );
        continue;
      }
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

/** A frame whose length prefix announces more bytes than the reader takes. */
export class FrameTooLargeError extends RangeError {
  constructor(
    readonly length: number,
    readonly limit: number,
  ) {
    super(`a frame of ${length} bytes is announced, more than ${limit}`);
  }
}

/**
 * Splits a byte stream into frame bodies. A frame that arrives whole within one chunk is a view
 * of that chunk; a larger one is copied, chunk by chunk as it arrives, into one buffer of the
 * length its prefix announces (no list of chunks, no join at the end). A prefix that announces
 * more than `limit()` bytes throws FrameTooLargeError before anything is allocated for it; the
 * stream cannot be read on after that.
 */
export class FrameReader {
  /** The frame being filled (prefix included, so tensor alignment holds), and how far. */
  private frame: Buffer | undefined;
  private filled = 0;
  /** A length prefix split across chunks. */
  private readonly prefix = Buffer.alloc(4);
  private prefixFilled = 0;

  constructor(private readonly limit: () => number = () => Infinity) {}

  push(chunk: Buffer): Buffer[] {
    const bodies: Buffer[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      if (this.frame) {
        const count = Math.min(chunk.length - offset, this.frame.length - this.filled);
        chunk.copy(this.frame, this.filled, offset, offset + count);
        this.filled += count;
        offset += count;
        if (this.filled === this.frame.length) {
          bodies.push(this.frame.subarray(4));
          this.frame = undefined;
        }
      } else if (this.prefixFilled === 0 && chunk.length - offset >= 4) {
        const end = offset + 4 + this.checked(chunk.readUInt32LE(offset));
        if (end <= chunk.length) {
          bodies.push(chunk.subarray(offset + 4, end));
          offset = end;
        } else {
          this.startFrame(chunk.readUInt32LE(offset));
        }
      } else {
        const count = Math.min(chunk.length - offset, 4 - this.prefixFilled);
        chunk.copy(this.prefix, this.prefixFilled, offset, offset + count);
        this.prefixFilled += count;
        offset += count;
        if (this.prefixFilled === 4) {
          this.prefixFilled = 0;
          this.startFrame(this.checked(this.prefix.readUInt32LE(0)));
          this.filled = 4;
          if (this.frame!.length === 4) {
            bodies.push(this.frame!.subarray(4));
            this.frame = undefined;
          }
        }
      }
    }
    return bodies;
  }

  private checked(length: number): number {
    const limit = this.limit();
    if (length > limit) throw new FrameTooLargeError(length, limit);
    return length;
  }

  private startFrame(length: number): void {
    // Not from the shared pool: the frame's tensors outlive this call, and a frame of its own
    // starts at an aligned address.
    this.frame = Buffer.allocUnsafeSlow(4 + length);
    this.frame.writeUInt32LE(length, 0);
    this.filled = 0;
  }
}
