import { describe, expect, it } from 'vitest';
import { publicModelUrl, redactPaths, redactPathsDeep } from './redact-paths.js';

describe('redactPaths', () => {
  it('keeps only the last segment of absolute paths', () => {
    expect(redactPaths('cannot load /srv/models/resnet/model.onnx: bad proto')).toBe(
      'cannot load model.onnx: bad proto',
    );
    expect(redactPaths('model not found: /etc/passwd')).toBe('model not found: passwd');
    expect(redactPaths("open '/tmp/x/y/z.bin'")).toBe("open 'z.bin'");
  });

  it('leaves URLs, routes and plain words alone', () => {
    for (const text of [
      'remote model URLs are not allowed (https://example.com/a/b)',
      'use /predictions/iris for JSON models',
      'shape [1, 3] / 2',
      'no route for GET /v2/models/x/infer',
      'no route for GET /v1/chat/x',
    ])
      expect(redactPaths(text)).toBe(text);
  });

  it('walks objects and arrays', () => {
    expect(
      redactPathsDeep({ a: ['/home/me/m/model.onnx'], b: { c: 1, d: '/var/lib/x.pt' } }),
    ).toEqual({ a: ['model.onnx'], b: { c: 1, d: 'x.pt' } });
  });
});

describe('publicModelUrl', () => {
  it('shows store models relative to the store, others by their last segment', () => {
    expect(publicModelUrl('/srv/store/resnet', '/srv/store')).toBe('resnet');
    expect(publicModelUrl('am::OnnxRuntime=file:///srv/store/a/b', '/srv/store')).toBe(
      'am::OnnxRuntime=file://a/b',
    );
    expect(publicModelUrl('iris=/home/me/.cache/kiln/demo/iris', undefined)).toBe('iris=iris');
    expect(publicModelUrl('/elsewhere/m.zip', '/srv/store')).toBe('m.zip');
  });
});
