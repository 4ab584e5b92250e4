import { KilnError, KilnErrorCode } from '../errors.js';
import type { ByteReader } from './byte-reader.js';
import type { ByteWriter } from './byte-writer.js';
import { malformed } from './limits.js';

// Java's `DataOutputStream.writeUTF` / `DataInputStream.readUTF`: a big-endian 2-byte length,
// then *modified* UTF-8 — UTF-16 code units one at a time, NUL as C0 80, and each surrogate of
// a supplementary character as its own 3-byte sequence.

const MAX_UTF_BYTES = 0xffff;

export function modifiedUtf8Length(text: string): number {
  let length = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    length += unit >= 0x01 && unit <= 0x7f ? 1 : unit <= 0x7ff ? 2 : 3;
  }
  return length;
}

export function writeJavaUtf(writer: ByteWriter, text: string, format: string): void {
  const length = modifiedUtf8Length(text);
  if (length > MAX_UTF_BYTES) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `${format}: a string of ${length} bytes exceeds Java's writeUTF limit of ${MAX_UTF_BYTES}`,
    );
  }
  writer.u16(length, false);
  const out = new Uint8Array(length);
  let at = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x01 && unit <= 0x7f) {
      out[at++] = unit;
    } else if (unit <= 0x7ff) {
      out[at++] = 0xc0 | (unit >> 6);
      out[at++] = 0x80 | (unit & 0x3f);
    } else {
      out[at++] = 0xe0 | (unit >> 12);
      out[at++] = 0x80 | ((unit >> 6) & 0x3f);
      out[at++] = 0x80 | (unit & 0x3f);
    }
  }
  writer.bytes(out);
}

/** Reads one string exactly as `DataInputStream.readUTF` does, rejecting what it rejects. */
export function readJavaUtf(reader: ByteReader, what: string, format: string): string {
  const length = reader.u16(`${what} length`, false);
  const bytes = reader.take(length, what);
  const units = new Uint16Array(length);
  let count = 0;
  for (let i = 0; i < length;) {
    const byte = bytes[i]!;
    switch (byte >> 4) {
      case 0x0:
      case 0x1:
      case 0x2:
      case 0x3:
      case 0x4:
      case 0x5:
      case 0x6:
      case 0x7:
        units[count++] = byte;
        i += 1;
        break;
      case 0xc:
      case 0xd:
        if (i + 2 > length || (bytes[i + 1]! & 0xc0) !== 0x80) throw badUtf(format, what, i);
        units[count++] = ((byte & 0x1f) << 6) | (bytes[i + 1]! & 0x3f);
        i += 2;
        break;
      case 0xe:
        if (i + 3 > length || (bytes[i + 1]! & 0xc0) !== 0x80 || (bytes[i + 2]! & 0xc0) !== 0x80) {
          throw badUtf(format, what, i);
        }
        units[count++] =
          ((byte & 0x0f) << 12) | ((bytes[i + 1]! & 0x3f) << 6) | (bytes[i + 2]! & 0x3f);
        i += 3;
        break;
      default:
        throw badUtf(format, what, i);
    }
  }
  let text = '';
  for (let i = 0; i < count; i += 4096) {
    const piece = units.subarray(i, Math.min(i + 4096, count)) as unknown as number[];
    text += String.fromCharCode.apply(null, piece); // not spread: that iterates the array
  }
  return text;
}

function badUtf(format: string, what: string, index: number): KilnError {
  return malformed(format, `${what} is not valid modified UTF-8 (byte ${index})`);
}
