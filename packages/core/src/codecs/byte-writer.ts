/**
 * An append-only byte buffer that grows by doubling; used for framed binary formats. Each write
 * reserves first: `reserve` may replace the buffer and its view.
 */
export class ByteWriter {
  private buffer = new Uint8Array(256);
  private view = new DataView(this.buffer.buffer);
  private length = 0;

  private reserve(count: number): number {
    const at = this.length;
    if (at + count > this.buffer.byteLength) {
      let capacity = this.buffer.byteLength * 2;
      while (capacity < at + count) capacity *= 2;
      const grown = new Uint8Array(capacity);
      grown.set(this.buffer.subarray(0, at));
      this.buffer = grown;
      this.view = new DataView(grown.buffer);
    }
    this.length += count;
    return at;
  }

  u8(value: number): void {
    const at = this.reserve(1);
    this.view.setUint8(at, value);
  }

  u16(value: number, littleEndian: boolean): void {
    const at = this.reserve(2);
    this.view.setUint16(at, value, littleEndian);
  }

  i32(value: number, littleEndian: boolean): void {
    const at = this.reserve(4);
    this.view.setInt32(at, value, littleEndian);
  }

  u32(value: number, littleEndian: boolean): void {
    const at = this.reserve(4);
    this.view.setUint32(at, value, littleEndian);
  }

  i64(value: bigint, littleEndian: boolean): void {
    const at = this.reserve(8);
    this.view.setBigInt64(at, value, littleEndian);
  }

  bytes(bytes: Uint8Array): void {
    const at = this.reserve(bytes.byteLength);
    this.buffer.set(bytes, at);
  }

  /** The bytes written so far (a view; the writer must not be used afterwards). */
  finish(): Uint8Array {
    return this.buffer.subarray(0, this.length);
  }
}
