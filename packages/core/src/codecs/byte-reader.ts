import { malformed } from './limits.js';

/**
 * Sequential reads from an untrusted buffer: every read is checked against what is left, so a
 * truncated or lying input fails with MALFORMED_TENSOR instead of a RangeError.
 */
export class ByteReader {
  readonly bytes: Uint8Array;
  offset = 0;
  private readonly view: DataView;
  private readonly format: string;

  constructor(bytes: Uint8Array, format: string) {
    this.bytes = bytes;
    this.format = format;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get remaining(): number {
    return this.bytes.byteLength - this.offset;
  }

  /** Throws unless `count` more bytes are available. */
  need(count: number, what: string): void {
    if (count > this.remaining) {
      throw malformed(
        this.format,
        `truncated ${what}: needs ${count} bytes at offset ${this.offset}, ${this.remaining} left`,
      );
    }
  }

  /** The next `count` bytes, as a view. */
  take(count: number, what: string): Uint8Array {
    this.need(count, what);
    const slice = this.bytes.subarray(this.offset, this.offset + count);
    this.offset += count;
    return slice;
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.offset++);
  }

  u16(what: string, littleEndian: boolean): number {
    this.need(2, what);
    const value = this.view.getUint16(this.offset, littleEndian);
    this.offset += 2;
    return value;
  }

  i32(what: string, littleEndian: boolean): number {
    this.need(4, what);
    const value = this.view.getInt32(this.offset, littleEndian);
    this.offset += 4;
    return value;
  }

  u32(what: string, littleEndian: boolean): number {
    this.need(4, what);
    const value = this.view.getUint32(this.offset, littleEndian);
    this.offset += 4;
    return value;
  }

  i64(what: string, littleEndian: boolean): bigint {
    this.need(8, what);
    const value = this.view.getBigInt64(this.offset, littleEndian);
    this.offset += 8;
    return value;
  }

  /** An unsigned 64-bit value that must fit a safe integer to be usable as a length. */
  u64Safe(what: string, littleEndian: boolean): number {
    this.need(8, what);
    const value = this.view.getBigUint64(this.offset, littleEndian);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw malformed(this.format, `${what} ${value} is too large`);
    }
    this.offset += 8;
    return Number(value);
  }
}
