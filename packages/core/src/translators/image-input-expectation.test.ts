import { describe, expect, it } from 'vitest';
import { imageInputExpectation } from './image-input-expectation.js';
import { imageClassificationOptions } from './image-options.js';

/** What the image classification translator feeds a model under these serving.properties. */
const expectation = (args: Record<string, string>) =>
  imageInputExpectation(imageClassificationOptions(args));

describe('imageInputExpectation', () => {
  it("states the defaults: RGB, 0..1, ImageNet's mean/std, NCHW 224×224, nothing to warn of", () => {
    expect(expectation({})).toEqual({
      channels: 'RGB',
      range: '0-1',
      normalize: { mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225] },
      statistics: 'imagenet',
      layout: 'NCHW',
      width: 224,
      height: 224,
      warnings: [],
    });
  });

  it('states a BGR 0..255 model without normalization (SqueezeNet from Caffe) as such', () => {
    const bgr = expectation({ channels: 'BGR', range: '0-255' });
    expect(bgr).toMatchObject({ channels: 'BGR', range: '0-255', normalize: false });
    expect(bgr.statistics).toBe('none');
    expect(bgr.warnings).toEqual([]);
  });

  it("warns when Caffe's BGR mean (std 1) is fed RGB pixels", () => {
    const caffe = expectation({ range: '0-255', normalize: '123.68,116.779,103.939,1,1,1' });
    expect(caffe.statistics).toBe('imagenet-caffe');
    expect(caffe.warnings).toEqual([
      expect.stringMatching(/Caffe.*channels=RGB: set channels=BGR/),
    ]);
    const right = expectation({
      channels: 'BGR',
      range: '0-255',
      normalize: '123.68,116.779,103.939,1,1,1',
    });
    expect(right.warnings).toEqual([]);
  });

  it("warns when the mean is written in Caffe's B,G,R order, or ImageNet's RGB statistics meet BGR", () => {
    const reversed = expectation({
      channels: 'BGR',
      range: '0-255',
      normalize: '103.939,116.779,123.68,1,1,1',
    });
    expect(reversed.warnings).toEqual([
      expect.stringMatching(
        /normalize lists the mean R,G,B; 103\.939,116\.779,123\.68 is ImageNet's in B,G,R order/,
      ),
    ]);
    expect(expectation({ channels: 'BGR' }).warnings).toEqual([
      expect.stringMatching(/torchvision's form.*channels=BGR: set channels=RGB/),
    ]);
  });

  it('warns of a mean in 0..255 units for 0..1 pixels', () => {
    const units = expectation({ range: '0-1', normalize: '123.68,116.779,103.939,58.4,57.1,57.4' });
    expect(units.warnings).toEqual([expect.stringMatching(/in 0\.\.255 units but range=0-1/)]);
  });
});
