import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '@kiln/core';
import {
  FrameKind,
  FrameReader,
  FrameTooLargeError,
  TENSOR_ALIGNMENT,
  decodeFrame,
  encodeFrame,
  encodeFrameParts,
} from './frames.js';

describe('frames', () => {
  const frame = {
    id: 7,
    kind: FrameKind.Call,
    properties: { a: 'b' },
    contents: [
      {
        name: 'x',
        dtype: 'float32' as const,
        shape: [2, 1],
        bytes: new Uint8Array(new Float32Array([1.5, -2]).buffer),
      },
      { name: 'raw', bytes: new TextEncoder().encode('hi') },
    ],
  };

  it('round-trips properties, tensors and bytes', () => {
    const encoded = encodeFrame(frame);
    expect(encoded.readUInt32LE(0)).toBe(encoded.length - 4);
    expect(decodeFrame(encoded.subarray(4))).toEqual(frame);
  });

  const large = {
    ...frame,
    contents: [
      { name: 'raw', bytes: new TextEncoder().encode('odd') },
      {
        name: 'big',
        dtype: 'float32' as const,
        shape: [2, 2_500],
        bytes: new Uint8Array(new Float32Array(5_000).fill(0.5).buffer),
      },
    ],
  };

  it('writes large tensor data as a view of the caller’s memory, aligned in the frame', () => {
    const parts = encodeFrameParts(large);
    const data = parts.find((p) => p.buffer === large.contents[1]!.bytes.buffer);
    expect(data).toBeDefined();
    const before = parts.slice(0, parts.indexOf(data!)).reduce((n, p) => n + p.length, 0);
    expect(before % TENSOR_ALIGNMENT).toBe(0);
    expect(decodeFrame(encodeFrame(large).subarray(4))).toEqual(large);
  });

  it('sends a small frame as one buffer', () => {
    expect(encodeFrameParts(frame)).toHaveLength(1);
  });

  it('carries 64-bit dimensions', () => {
    const wide = {
      ...frame,
      contents: [
        { name: 'w', dtype: 'int8' as const, shape: [0, 2 ** 40 + 3], bytes: new Uint8Array(0) },
      ],
    };
    expect(decodeFrame(encodeFrame(wide).subarray(4))).toEqual(wide);
  });

  it('decodes aligned tensor data in place, without copying', () => {
    const encoded = Buffer.alloc(encodeFrame(frame).length + TENSOR_ALIGNMENT);
    // A frame starting at an aligned offset of its buffer.
    const start = (TENSOR_ALIGNMENT - (encoded.byteOffset % TENSOR_ALIGNMENT)) % TENSOR_ALIGNMENT;
    encodeFrame(frame).copy(encoded, start);
    const body = encoded.subarray(start + 4);
    const decoded = decodeFrame(body);
    const x = decoded.contents[0]!;
    expect(x.bytes.buffer).toBe(encoded.buffer);
    expect(x.bytes.byteOffset % TENSOR_ALIGNMENT).toBe(0);
    expect([...new Float32Array(x.bytes.buffer, x.bytes.byteOffset, 2)]).toEqual([1.5, -2]);
    // Misaligned, it is copied into aligned storage.
    const shifted = Buffer.alloc(encoded.length + 1);
    encodeFrame(frame).copy(shifted, start + 1);
    const copied = decodeFrame(shifted.subarray(start + 5)).contents[0]!;
    expect(copied.bytes.byteOffset % 4).toBe(0);
    expect([...new Float32Array(copied.bytes.buffer, copied.bytes.byteOffset, 2)]).toEqual([
      1.5, -2,
    ]);
  });

  it('reassembles frames split across and packed into chunks', () => {
    const two = Buffer.concat([encodeFrame(frame), encodeFrame({ ...frame, id: 8 })]);
    const reader = new FrameReader();
    const bodies = [...reader.push(two.subarray(0, 5)), ...reader.push(two.subarray(5))];
    expect(bodies.map((b) => decodeFrame(b).id)).toEqual([7, 8]);
  });

  it('reassembles frames from one-byte chunks and a large frame from many chunks', () => {
    const stream = Buffer.concat([encodeFrame(frame), encodeFrame(large), encodeFrame(frame)]);
    for (const size of [1, 7, 64 * 1024]) {
      const reader = new FrameReader();
      const bodies: Buffer[] = [];
      for (let at = 0; at < stream.length; at += size) {
        bodies.push(...reader.push(stream.subarray(at, at + size)));
      }
      expect(bodies.map((b) => decodeFrame(b))).toEqual([frame, large, frame]);
    }
  });

  it('refuses a frame announced over its limit from the length prefix alone, whole or split', () => {
    const encoded = encodeFrame(frame);
    const limit = encoded.length - 5;
    expect(() => new FrameReader(() => limit).push(encoded)).toThrow(FrameTooLargeError);
    // Only the prefix has arrived: nothing of the frame is allocated or awaited.
    const split = new FrameReader(() => limit);
    expect(split.push(encoded.subarray(0, 2))).toEqual([]);
    expect(() => split.push(encoded.subarray(2, 4))).toThrow(
      expect.objectContaining({ length: encoded.length - 4, limit }) as Error,
    );
    expect(new FrameReader(() => encoded.length - 4).push(encoded)).toHaveLength(1);
  });

  it('rejects a truncated frame with an engine error', () => {
    const encoded = encodeFrame(frame);
    expect(() => decodeFrame(encoded.subarray(4, encoded.length - 3))).toThrow(
      expect.objectContaining({ code: KilnErrorCode.EngineError }) as Error,
    );
  });
});
