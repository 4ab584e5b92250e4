import { describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode } from '../errors.js';
import { formatModelUrl, parseModelUrl } from './model-url.js';

describe('parseModelUrl', () => {
  it('reads every field of name:version:engine:device', () => {
    expect(parseModelUrl('resnet:1.2:OnnxRuntime:gpu0=file:///m/resnet.zip')).toEqual({
      name: 'resnet',
      version: '1.2',
      engine: 'OnnxRuntime',
      device: 'gpu0',
      url: 'file:///m/resnet.zip',
    });
  });

  it('leaves an empty version undefined (DJL resnet::PyTorch=…)', () => {
    expect(parseModelUrl('resnet::PyTorch=file:///m/resnet18')).toEqual({
      name: 'resnet',
      version: undefined,
      engine: 'PyTorch',
      device: undefined,
      url: 'file:///m/resnet18',
    });
  });

  it('accepts fewer fields and an empty prefix', () => {
    expect(parseModelUrl('bert=models/bert')).toMatchObject({ name: 'bert', engine: undefined });
    expect(parseModelUrl('bert:2=models/bert')).toMatchObject({ name: 'bert', version: '2' });
    expect(parseModelUrl(':::cpu=m')).toMatchObject({ name: undefined, device: 'cpu', url: 'm' });
    expect(parseModelUrl('=models/bert')).toMatchObject({ name: undefined, url: 'models/bert' });
  });

  it.each([
    'file:///m/resnet18',
    '/abs/models/resnet18.tar.gz',
    'relative/model.onnx',
    'model.onnx',
    'C:\\models\\resnet',
    'https://example.com/m.zip',
  ])('takes %s as a bare URL', (spec) => {
    expect(parseModelUrl(spec)).toEqual({
      name: undefined,
      version: undefined,
      engine: undefined,
      device: undefined,
      url: spec,
    });
  });

  it('keeps an = inside the URL query in the URL', () => {
    expect(parseModelUrl('file:///m/resnet.zip?model_name=x').url).toBe(
      'file:///m/resnet.zip?model_name=x',
    );
    expect(parseModelUrl('https://h/m.zip?a=b&c=d').name).toBeUndefined();
    // Without a path separator before `=`, a query still marks the URL as bare.
    expect(parseModelUrl('model.zip?opt=1')).toMatchObject({
      name: undefined,
      url: 'model.zip?opt=1',
    });
    expect(parseModelUrl('file:m.zip#a=b').url).toBe('file:m.zip#a=b');
    const prefixed = parseModelUrl('resnet=file:///m/resnet.zip?a=b');
    expect(prefixed).toMatchObject({ name: 'resnet', url: 'file:///m/resnet.zip?a=b' });
  });

  it('trims odd spacing around the whole spec, the fields and the URL', () => {
    expect(parseModelUrl('  resnet : 1 :  PyTorch : cpu =  file:///m/r  ')).toEqual({
      name: 'resnet',
      version: '1',
      engine: 'PyTorch',
      device: 'cpu',
      url: 'file:///m/r',
    });
    expect(parseModelUrl('\tresnet:  :PyTorch=m\n')).toMatchObject({
      version: undefined,
      engine: 'PyTorch',
    });
  });

  it.each([
    ['', 'empty'],
    ['   ', 'blank'],
    ['resnet=', 'no location'],
    ['resnet=   ', 'blank location'],
    ['a:b:c:d:e=m', 'too many fields'],
  ])('refuses %j (%s) with INVALID_INPUT', (spec) => {
    expect(() => parseModelUrl(spec)).toThrow(KilnError);
    try {
      parseModelUrl(spec);
    } catch (error) {
      expect(KilnError.is(error, KilnErrorCode.InvalidInput)).toBe(true);
    }
  });
});

describe('formatModelUrl', () => {
  it.each([
    'resnet::PyTorch=file:///m/resnet18',
    'resnet:1:OnnxRuntime:gpu0=m.zip',
    'bert=models/bert',
    'file:///m/resnet.zip?model_name=x',
  ])('round-trips %s', (spec) => {
    expect(formatModelUrl(parseModelUrl(spec))).toBe(spec);
  });

  it('drops trailing empty fields', () => {
    expect(
      formatModelUrl({
        name: 'a',
        version: undefined,
        engine: undefined,
        device: undefined,
        url: 'm',
      }),
    ).toBe('a=m');
  });
});
