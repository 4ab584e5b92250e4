import { crc32, deflateSync } from 'node:zlib';
import fc from 'fast-check';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { describe, expect, it } from 'vitest';
import { KilnError } from '../errors.js';
import { detectImageFormat } from '../codecs/detect.js';
import { decodeImage } from './image-decode.js';

function rgba(
  width: number,
  height: number,
  pixel: (x: number, y: number) => [number, number, number],
): Buffer {
  const data = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      data.set([...pixel(x, y), 255], (y * width + x) * 4);
    }
  }
  return data;
}

function png(
  width: number,
  height: number,
  pixel: (x: number, y: number) => [number, number, number],
): Uint8Array {
  const image = new PNG({ width, height });
  image.data = rgba(width, height, pixel);
  return PNG.sync.write(image);
}

function jpg(
  width: number,
  height: number,
  pixel: (x: number, y: number) => [number, number, number],
): Uint8Array {
  return jpeg.encode({ width, height, data: rgba(width, height, pixel) }, 95).data;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const out = Buffer.alloc(body.length + 8);
  out.writeUInt32BE(data.length, 0);
  body.copy(out, 4);
  out.writeUInt32BE(crc32(body), body.length + 4);
  return out;
}

/** A hand-built PNG: 8-bit RGBA, optionally interlaced, with the given compressed rows. */
function handmadePng(
  width: number,
  height: number,
  interlaced: boolean,
  idat: Uint8Array,
): Uint8Array {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 6, 0, 0, interlaced ? 1 : 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', new Uint8Array(0)),
  ]);
}

function decodeError(bytes: Uint8Array, limits?: Parameters<typeof decodeImage>[1]): KilnError {
  try {
    decodeImage(bytes, limits);
  } catch (error) {
    if (error instanceof KilnError) return error;
    throw error;
  }
  throw new Error('expected decoding to fail');
}

describe('detectImageFormat', () => {
  it('recognises JPEG and PNG by their first bytes only', () => {
    expect(detectImageFormat(jpg(2, 2, () => [0, 0, 0]))).toBe('jpeg');
    expect(detectImageFormat(png(2, 2, () => [0, 0, 0]))).toBe('png');
    expect(detectImageFormat(new TextEncoder().encode('{"inputs": []}'))).toBeUndefined();
    expect(detectImageFormat(new Uint8Array([0x89, 0x50]))).toBeUndefined();
  });
});

describe('decodeImage', () => {
  it('decodes PNG pixels exactly', () => {
    const image = decodeImage(png(3, 2, (x, y) => [x * 50, y * 100, 7]));
    expect(image).toMatchObject({ width: 3, height: 2, channels: 4 });
    expect(Array.from(image.data.subarray(0, 8))).toEqual([0, 0, 7, 255, 50, 0, 7, 255]);
    expect(Array.from(image.data.subarray(20, 24))).toEqual([100, 100, 7, 255]);
  });

  it('expands a greyscale PNG to RGBA', () => {
    const image = new PNG({
      width: 2,
      height: 1,
      colorType: 0,
      inputColorType: 0,
      inputHasAlpha: false,
    });
    image.data = Buffer.from([40, 220]);
    const decoded = decodeImage(
      PNG.sync.write(image, { colorType: 0, inputColorType: 0, inputHasAlpha: false }),
    );
    expect(Array.from(decoded.data)).toEqual([40, 40, 40, 255, 220, 220, 220, 255]);
  });

  it('decodes an interlaced PNG', () => {
    // A 1×1 image has one pixel, in the first Adam7 pass: filter byte 0, then RGBA.
    const decoded = decodeImage(
      handmadePng(1, 1, true, deflateSync(Buffer.from([0, 9, 8, 7, 255]))),
    );
    expect(Array.from(decoded.data)).toEqual([9, 8, 7, 255]);
  });

  it('refuses an interlaced PNG whose data inflates far past its size', () => {
    const bomb = handmadePng(1, 1, true, deflateSync(Buffer.alloc(4 * 1024 * 1024)));
    expect(bomb.length).toBeLessThan(10_000);
    const error = decodeError(bomb);
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toContain('inflates past the 1×1 size');
  });

  it('refuses a PNG larger than the resolution limit before decoding it', () => {
    const huge = handmadePng(100_000, 100_000, false, deflateSync(Buffer.alloc(8)));
    const error = decodeError(huge);
    expect(error.code).toBe('PAYLOAD_TOO_LARGE');
    expect(error.message).toContain('100000×100000');
  });

  it('decodes a solid JPEG to its colour', () => {
    const image = decodeImage(jpg(16, 16, () => [200, 100, 50]));
    expect(image).toMatchObject({ width: 16, height: 16, channels: 4 });
    for (const [i, expected] of [200, 100, 50].entries()) {
      expect(Math.abs(image.data[i]! - expected)).toBeLessThanOrEqual(2);
      expect(Math.abs(image.data[(16 * 16 - 1) * 4 + i]! - expected)).toBeLessThanOrEqual(2);
    }
  });

  it('keeps a JPEG gradient in order', () => {
    const image = decodeImage(jpg(64, 8, (x) => [x * 4, 0, 0]));
    const reds = Array.from({ length: 8 }, (_, i) => image.data[(4 * 64 + i * 8) * 4]!);
    reds.forEach((red, i) => expect(Math.abs(red - i * 32)).toBeLessThanOrEqual(8));
  });

  it('refuses a JPEG over the resolution limit', () => {
    const error = decodeError(
      jpg(1100, 1000, () => [1, 2, 3]),
      { maxResolutionInMP: 1, maxMemoryUsageInMB: 512 },
    );
    expect(error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('answers INVALID_INPUT for bodies that are not images', () => {
    for (const body of [
      new Uint8Array(0),
      new TextEncoder().encode('hello'),
      new Uint8Array([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]),
    ]) {
      const error = decodeError(body);
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toBe('expected a JPEG or PNG image');
    }
  });

  it('answers INVALID_INPUT for truncated and corrupted images', () => {
    const good = png(8, 8, (x, y) => [x * 30, y * 30, 0]);
    expect(decodeError(good.subarray(0, good.length - 20)).code).toBe('INVALID_INPUT');
    const flipped = Uint8Array.from(good);
    flipped[45] = flipped[45]! ^ 0xff;
    expect(decodeError(flipped).code).toBe('INVALID_INPUT');
    const garbage = Uint8Array.from([
      0xff,
      0xd8,
      0xff,
      ...new TextEncoder().encode('not really a jpeg'),
    ]);
    expect(decodeError(garbage).code).toBe('INVALID_INPUT');
  });

  it('never fails with anything but a KilnError on mutated images', () => {
    const samples = [
      png(12, 10, (x, y) => [x * 20, y * 20, 90]),
      jpg(12, 10, (x, y) => [x * 20, y * 20, 90]),
    ];
    const limits = { maxResolutionInMP: 1, maxMemoryUsageInMB: 32 };
    fc.assert(
      fc.property(
        fc.constantFrom(...samples),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), {
          minLength: 1,
          maxLength: 8,
        }),
        fc.option(fc.nat(), { nil: undefined }),
        (sample, edits, cut) => {
          const bytes = Uint8Array.from(sample);
          for (const [at, value] of edits) bytes[3 + (at % (bytes.length - 3))] = value;
          const body =
            cut === undefined ? bytes : bytes.subarray(0, 3 + (cut % (bytes.length - 3)));
          try {
            const image = decodeImage(body, limits);
            expect(image.data.length).toBe(image.width * image.height * image.channels);
          } catch (error) {
            expect(error).toBeInstanceOf(KilnError);
            expect(['INVALID_INPUT', 'PAYLOAD_TOO_LARGE']).toContain((error as KilnError).code);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
