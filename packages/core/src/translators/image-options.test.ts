import { describe, expect, it } from 'vitest';
import { KilnError } from '../errors.js';
import { IMAGENET_NORMALIZATION, imageClassificationOptions } from './image-options.js';

const NCHW = { name: 'data', dtype: 'float32', shape: [-1, 3, 299, 300] } as const;
const NHWC = { name: 'input_1', dtype: 'float32', shape: [-1, 192, 160, 3] } as const;

function configError(args: Record<string, string>): KilnError {
  try {
    imageClassificationOptions(args);
  } catch (error) {
    if (error instanceof KilnError) return error;
    throw error;
  }
  throw new Error('expected a configuration error');
}

describe('imageClassificationOptions', () => {
  it('uses the documented defaults without a model input', () => {
    expect(imageClassificationOptions({})).toMatchObject({
      width: 224,
      height: 224,
      resize: 256,
      centerCrop: true,
      channels: 'RGB',
      range: '0-1',
      normalize: IMAGENET_NORMALIZATION,
      layout: 'NCHW',
      applySoftmax: 'auto',
      topK: 5,
      synsetFileName: 'synset.txt',
    });
  });

  it('takes size and layout from the model input', () => {
    expect(imageClassificationOptions({}, NCHW)).toMatchObject({
      layout: 'NCHW',
      height: 299,
      width: 300,
      resize: 343,
    });
    expect(imageClassificationOptions({}, NHWC)).toMatchObject({
      layout: 'NHWC',
      height: 192,
      width: 160,
    });
    const dynamic = { name: 'x', dtype: 'float32', shape: [-1, 3, -1, -1] } as const;
    expect(imageClassificationOptions({}, dynamic)).toMatchObject({ width: 224, height: 224 });
  });

  it('lets arguments override the model', () => {
    const options = imageClassificationOptions(
      {
        width: '64',
        height: '48',
        resize: 'false',
        centerCrop: 'false',
        channels: 'bgr',
        layout: 'NHWC',
        topK: '3',
        applySoftmax: 'true',
      },
      NCHW,
    );
    expect(options).toMatchObject({
      width: 64,
      height: 48,
      resize: false,
      centerCrop: false,
      channels: 'BGR',
      layout: 'NHWC',
      topK: 3,
      applySoftmax: true,
    });
  });

  it('normalises with ImageNet statistics in the units of the range', () => {
    expect(imageClassificationOptions({ range: '0-255' }).normalize).toBe(false);
    const scaled = imageClassificationOptions({ range: '0-255', normalize: 'true' }).normalize;
    expect(scaled && scaled.mean[0]).toBeCloseTo(0.485 * 255, 10);
    expect(imageClassificationOptions({ normalize: 'false' }).normalize).toBe(false);
    expect(
      imageClassificationOptions({ normalize: '0.5, 0.5, 0.5, 0.25, 0.25, 0.25' }).normalize,
    ).toEqual({
      mean: [0.5, 0.5, 0.5],
      std: [0.25, 0.25, 0.25],
    });
  });

  it('rejects values that do not parse, naming the key', () => {
    expect(configError({ width: 'wide' }).message).toContain('width=wide');
    expect(configError({ topK: '0' }).code).toBe('INVALID_CONFIG');
    expect(configError({ channels: 'RGBA' }).message).toContain('RGB, BGR');
    expect(configError({ normalize: '1,2,3' }).message).toContain('six numbers');
    expect(configError({ normalize: '0,0,0,1,0,1' }).message).toContain('std > 0');
    expect(configError({ centerCrop: 'yes' }).message).toContain('true or false');
  });

  it('rejects a shorter-side resize smaller than the crop', () => {
    expect(configError({ resize: '200' }).message).toContain('at least 224');
    expect(imageClassificationOptions({ resize: '200', centerCrop: 'false' }).resize).toBe(200);
  });
});
