// The protobuf wire format, as much of it as the Open Inference Protocol's gRPC messages use:
// read in place (bytes and nested messages are views, never copies) and written in one buffer.

/** Wire types: varint, 64-bit, length-delimited, 32-bit. */
export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;
export const I32 = 5;

/** Bytes that are no message of the expected kind; the reason names the byte. */
export class WireError extends Error {}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** Reads the fields of one message, in order, from `bytes[start, end)`. */
export class WireReader {
  private readonly view: DataView;

  constructor(
    private readonly data: Uint8Array,
    private pos = 0,
    private readonly end = data.byteLength,
  ) {
    this.view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** The next field's number and wire type. */
  tag(): { field: number; wire: number } {
    const at = this.pos;
    const tag = this.uint();
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (field === 0 || ![VARINT, I64, LEN, I32].includes(wire)) {
      throw new WireError(`field ${field} with wire type ${wire} at byte ${at}`);
    }
    return { field, wire };
  }

  /** A varint as a number: tags and lengths. */
  uint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 5; i++) {
      const byte = this.byte();
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    throw new WireError(`a varint too long for a tag or length at byte ${this.pos}`);
  }

  /** A varint as its 64 bits, unsigned. */
  varint(): bigint {
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      const byte = this.byte();
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return BigInt.asUintN(64, value);
    }
    throw new WireError(`a varint longer than 10 bytes at byte ${this.pos}`);
  }

  float(): number {
    const at = this.advance(4);
    return this.view.getFloat32(at, true);
  }

  double(): number {
    const at = this.advance(8);
    return this.view.getFloat64(at, true);
  }

  /** A length-delimited field's bytes, viewed in place. */
  bytes(): Uint8Array {
    const length = this.uint();
    const at = this.advance(length);
    return this.data.subarray(at, at + length);
  }

  string(): string {
    const at = this.pos;
    try {
      return utf8.decode(this.bytes());
    } catch (error) {
      if (error instanceof WireError) throw error;
      throw new WireError(`a string that is not UTF-8 at byte ${at}`);
    }
  }

  /** A nested message's reader. */
  message(): WireReader {
    const length = this.uint();
    const at = this.advance(length);
    return new WireReader(this.data, at, at + length);
  }

  /**
   * A repeated scalar field's elements, packed (one length-delimited run) or one per tag, read
   * with `read` from this field's value on.
   */
  repeated<T>(wire: number, elementWire: number, read: (reader: WireReader) => T, into: T[]): void {
    if (wire === elementWire) {
      into.push(read(this));
      return;
    }
    if (wire !== LEN) throw new WireError(`a repeated field with wire type ${wire}`);
    const packed = this.message();
    while (!packed.done) into.push(read(packed));
  }

  /** Passes over a field this reader does not want. */
  skip(wire: number): void {
    if (wire === VARINT) this.varint();
    else if (wire === I64) this.advance(8);
    else if (wire === I32) this.advance(4);
    else this.advance(this.uint());
  }

  /** Checks a field's wire type before it is read. */
  expect(wire: number, expected: number, what: string): void {
    if (wire !== expected) throw new WireError(`${what} has wire type ${wire}`);
  }

  private byte(): number {
    if (this.pos >= this.end) throw new WireError(`the message ends inside a field`);
    return this.data[this.pos++]!;
  }

  private advance(length: number): number {
    const at = this.pos;
    if (length > this.end - at) {
      throw new WireError(`a field of ${length} bytes runs past the end at byte ${at}`);
    }
    this.pos = at + length;
    return at;
  }
}

/** Writes one message's fields; `finish` joins them in one buffer. */
export class WireWriter {
  private readonly chunks: Uint8Array[] = [];
  private size = 0;

  bytes(field: number, bytes: Uint8Array): this {
    return this.key(field, LEN).raw(varintBytes(bytes.byteLength)).raw(bytes);
  }

  /** A string field; empty is proto3's default, left out. */
  string(field: number, text: string): this {
    return text === '' ? this : this.bytes(field, encoder.encode(text));
  }

  /** Non-negative integers as one packed run. */
  packed(field: number, values: readonly number[]): this {
    return values.length === 0 ? this : this.bytes(field, concat(values.map(varintBytes)));
  }

  message(field: number, message: WireWriter): this {
    return this.bytes(field, message.finish());
  }

  finish(): Uint8Array {
    return this.chunks.length === 1 ? this.chunks[0]! : concat(this.chunks, this.size);
  }

  private key(field: number, wire: number): this {
    return this.raw(varintBytes(field * 8 + wire));
  }

  private raw(bytes: Uint8Array): this {
    this.chunks.push(bytes);
    this.size += bytes.byteLength;
    return this;
  }
}

function varintBytes(value: number): Uint8Array {
  const out: number[] = [];
  while (value >= 0x80) {
    out.push((value % 0x80) | 0x80);
    value = Math.floor(value / 0x80);
  }
  out.push(value);
  return Uint8Array.from(out);
}

function concat(chunks: readonly Uint8Array[], size?: number): Uint8Array {
  const out = new Uint8Array(size ?? chunks.reduce((sum, c) => sum + c.byteLength, 0));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}
