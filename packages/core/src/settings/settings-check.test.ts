import { describe, expect, it } from 'vitest';
import { type SettingDeclaration, closestKey } from './setting-declaration.js';
import { checkDeclaredValue, checkSettings, unknownKeyWarning } from './settings-check.js';

describe('closestKey', () => {
  const known = ['inference_address', 'max_workers', 'maxWorkers', 'batch_size', 'topK'];

  it('prefers the same letters in another spelling, then the fewest edits', () => {
    expect(closestKey('max-workers', known)).toBe('max_workers');
    expect(closestKey('MAXWORKERS', ['maxWorkers', 'max_worker'])).toBe('maxWorkers');
    expect(closestKey('inference_adress', known)).toBe('inference_address');
    expect(closestKey('batch_szie', known)).toBe('batch_size');
    expect(closestKey('topk', known)).toBe('topK');
  });

  it('names nothing when no key is close', () => {
    expect(closestKey('log_model_metric', known)).toBeUndefined();
    expect(closestKey('disablePerSessionThreads', ['intraOpNumThreads'])).toBeUndefined();
  });
});

describe('checkSettings', () => {
  const declarations: SettingDeclaration[] = [
    { key: 'port', type: 'integer', min: 1, doc: 'port' },
    { key: 'mode', type: 'choice', values: ['fast', 'slow'], doc: 'mode' },
    { key: 'netty_threads', type: 'integer', doc: 'threads', unsupported: 'no Netty here' },
    {
      key: 'library',
      type: 'file',
      doc: 'a library',
      refuse: (value) => `cannot load ${value.split('/').at(-1)}`,
    },
  ];

  it('warns about unknown keys naming the closest known one, and unsupported keys by name', () => {
    const { warnings, errors } = checkSettings(
      { prot: '80', whatever: 'x', netty_threads: '4' },
      declarations,
    );
    expect(errors).toEqual([]);
    expect(warnings).toEqual([
      { key: 'prot', message: 'unknown key prot (did you mean port?)', suggestion: 'port' },
      { key: 'whatever', message: 'unknown key whatever: Kiln ignores it' },
      {
        key: 'netty_threads',
        message: 'netty_threads is not supported by Kiln, ignored: no Netty here',
      },
    ]);
  });

  it('refuses choices it does not offer and values it cannot honour', () => {
    const { errors } = checkSettings({ mode: 'warp', library: '/srv/x/libops.so' }, declarations);
    expect(errors).toEqual([
      'mode=warp is not one of fast, slow',
      'library=libops.so: cannot load libops.so',
    ]);
    // A file's folder is never shown: errors reach HTTP clients.
    expect(errors.join()).not.toMatch(/\/srv/);
    expect(checkSettings({ mode: 'FAST', library: '' }, declarations).errors).toEqual([]);
  });
});

describe('checkDeclaredValue / unknownKeyWarning', () => {
  it('says who ignores an unknown key', () => {
    expect(unknownKeyWarning('option.x', [], 'the OnnxRuntime engine ignores it').message).toBe(
      'unknown key option.x: the OnnxRuntime engine ignores it',
    );
  });

  it('passes a declared key with a value it can honour', () => {
    expect(
      checkDeclaredValue('port', { key: 'port', type: 'integer', doc: 'port' }, '8080'),
    ).toEqual({});
  });
});
