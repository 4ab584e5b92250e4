import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '@kiln/core';
import { FrameKind, FrameReader, decodeFrame, encodeFrame } from './frames.js';

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

  it('reassembles frames split across and packed into chunks', () => {
    const two = Buffer.concat([encodeFrame(frame), encodeFrame({ ...frame, id: 8 })]);
    const reader = new FrameReader();
    const bodies = [...reader.push(two.subarray(0, 5)), ...reader.push(two.subarray(5))];
    expect(bodies.map((b) => decodeFrame(b).id)).toEqual([7, 8]);
  });

  it('rejects a truncated frame with an engine error', () => {
    const encoded = encodeFrame(frame);
    expect(() => decodeFrame(encoded.subarray(4, encoded.length - 3))).toThrow(
      expect.objectContaining({ code: KilnErrorCode.EngineError }) as Error,
    );
  });
});
