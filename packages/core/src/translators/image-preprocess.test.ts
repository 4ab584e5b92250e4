import { describe, expect, it } from 'vitest';
import type { DecodedImage } from './image-decode.js';
import { type ImagePreprocessOptions, preprocessImage } from './image-preprocess.js';

const PLAIN: ImagePreprocessOptions = {
  width: 2,
  height: 2,
  resize: false,
  centerCrop: false,
  channels: 'RGB',
  range: '0-255',
  normalize: false,
  layout: 'NCHW',
};

/** RGBA image whose red channel is a linear gradient 10·x + 40·y; green and blue are fixed offsets. */
function gradient(width: number, height: number): DecodedImage {
  const data = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      data[i] = 10 * x + 40 * y;
      data[i + 1] = 1 + x;
      data[i + 2] = 200 + y;
      data[i + 3] = 255;
    }
  }
  return { width, height, channels: 4, data };
}

/** Red plane of an NCHW result as rows. */
function redRows(data: Float32Array, width: number, height: number): number[][] {
  return Array.from({ length: height }, (_, y) =>
    Array.from(data.subarray(y * width, (y + 1) * width)),
  );
}

describe('preprocessImage', () => {
  it('copies pixels exactly when no resampling is needed', () => {
    const image = gradient(2, 2);
    const tensor = preprocessImage(image, PLAIN);
    expect(tensor.dtype).toBe('float32');
    expect(tensor.shape).toEqual([1, 3, 2, 2]);
    expect(Array.from(tensor.data)).toEqual([0, 10, 40, 50, 1, 2, 1, 2, 200, 200, 201, 201]);
  });

  it('writes BGR order in NHWC layout', () => {
    const tensor = preprocessImage(gradient(2, 2), { ...PLAIN, channels: 'BGR', layout: 'NHWC' });
    expect(tensor.shape).toEqual([1, 2, 2, 3]);
    expect(Array.from(tensor.data)).toEqual([200, 1, 0, 200, 2, 10, 201, 1, 40, 201, 2, 50]);
  });

  it('scales to 0..1 and normalises each channel with its own statistics', () => {
    const normalize = { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] } as const;
    const tensor = preprocessImage(gradient(2, 2), { ...PLAIN, range: '0-1', normalize });
    const at = (c: number, i: number) => tensor.data[c * 4 + i]!;
    expect(at(0, 3)).toBeCloseTo((50 / 255 - 0.485) / 0.229, 5);
    expect(at(1, 1)).toBeCloseTo((2 / 255 - 0.456) / 0.224, 5);
    expect(at(2, 2)).toBeCloseTo((201 / 255 - 0.406) / 0.225, 5);
  });

  it('keeps mean and std tied to their colour when the order is BGR', () => {
    const normalize = { mean: [10, 20, 30], std: [1, 2, 4] } as const;
    const tensor = preprocessImage(gradient(2, 2), { ...PLAIN, channels: 'BGR', normalize });
    // Channel 0 now holds blue, normalised with blue's statistics (mean 30, std 4).
    expect(tensor.data[0]).toBeCloseTo((200 - 30) / 4, 6);
    expect(tensor.data[8]).toBeCloseTo((0 - 10) / 1, 6);
  });

  it('downscales with a widened triangle filter, as Pillow does', () => {
    // A 6-pixel row to 2 (scale 3): output 0 is centred on source 1.5 and weighs source
    // pixels 0..4 by 2/3, 1, 2/3, 1/3, 0 (normalised by 8/3); output 1 weighs 2..5 by 1/3,
    // 2/3, 1, 2/3. Pillow gives 75 and 214 (rounded) for the same row.
    const row = [0, 60, 120, 180, 240, 255];
    const image: DecodedImage = { width: 6, height: 1, channels: 1, data: Uint8Array.from(row) };
    const tensor = preprocessImage(image, { ...PLAIN, height: 1 });
    expect(tensor.data[0]).toBeCloseTo(75, 4);
    expect(tensor.data[1]).toBeCloseTo(213.75, 4);
  });

  it('downscales both axes, renormalising the weights at the edges', () => {
    // 4 → 2 on each axis: output 0 weighs source 0, 1, 2 by 0.75, 0.75, 0.25 (sum 1.75), so a
    // linear ramp 0..3 gives 5/7 and, mirrored, 16/7 (Pillow: 36, 52, 98, 114 rounded).
    const ramp = [5 / 7, 16 / 7];
    const tensor = preprocessImage(gradient(4, 4), PLAIN);
    const rows = redRows(tensor.data, 2, 2);
    ramp.forEach((y, i) =>
      ramp.forEach((x, j) => expect(rows[i]![j]).toBeCloseTo(10 * x + 40 * y, 4)),
    );
  });

  it('upscales with half-pixel centres and clamps at the edges', () => {
    const tensor = preprocessImage(gradient(2, 2), { ...PLAIN, width: 4, height: 4 });
    // Source positions: -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1).
    const xs = [0, 0.25, 0.75, 1];
    const expected = xs.map((y) => xs.map((x) => 10 * x + 40 * y));
    expect(redRows(tensor.data, 4, 4)).toEqual(expected);
  });

  it('resizes the shorter side, then cuts the centre', () => {
    // 8×4 → shorter side 2 gives 4×2; the 2×2 crop starts at x = 1 of the resized image, so
    // columns centre on source 3 and 5 (symmetric taps: 2.5 and 4.5 on the ramp) and rows
    // on source 1 and 3 (5/7 and 16/7, as in the 4 → 2 case).
    const tensor = preprocessImage(gradient(8, 4), { ...PLAIN, resize: 2, centerCrop: true });
    const rows = redRows(tensor.data, 2, 2);
    [5 / 7, 16 / 7].forEach((y, i) =>
      [2.5, 4.5].forEach((x, j) => expect(rows[i]![j]).toBeCloseTo(10 * x + 40 * y, 4)),
    );
  });

  it('squeezes the whole image when the crop is off', () => {
    // Columns 8 → 2 (scale 4): weights 5/8, 7/8, 7/8, 5/8, 3/8, 1/8 over source 0..5 give
    // 53/28, mirrored 143/28 (Pillow: 48, 80, 110, 142 rounded).
    const tensor = preprocessImage(gradient(8, 4), { ...PLAIN, resize: 2, centerCrop: false });
    const rows = redRows(tensor.data, 2, 2);
    [5 / 7, 16 / 7].forEach((y, i) =>
      [53 / 28, 143 / 28].forEach((x, j) => expect(rows[i]![j]).toBeCloseTo(10 * x + 40 * y, 4)),
    );
  });

  it('repeats a grey channel into all three', () => {
    const image: DecodedImage = {
      width: 2,
      height: 1,
      channels: 1,
      data: new Uint8Array([30, 60]),
    };
    const tensor = preprocessImage(image, { ...PLAIN, height: 1, layout: 'NHWC' });
    expect(Array.from(tensor.data)).toEqual([30, 30, 30, 60, 60, 60]);
  });

  it('reads 3-channel pixels with their own stride', () => {
    const image: DecodedImage = {
      width: 2,
      height: 1,
      channels: 3,
      data: new Uint8Array([1, 2, 3, 4, 5, 6]),
    };
    const tensor = preprocessImage(image, { ...PLAIN, height: 1, channels: 'BGR' });
    expect(Array.from(tensor.data)).toEqual([3, 6, 2, 5, 1, 4]);
  });
});
