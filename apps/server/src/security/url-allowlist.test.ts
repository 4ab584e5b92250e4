import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkModelLocation } from './url-allowlist.js';

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-allowlist-')));
const store = path.join(root, 'store');
const elsewhere = path.join(root, 'elsewhere');
fs.mkdirSync(path.join(store, 'model'), { recursive: true });
fs.mkdirSync(elsewhere);
fs.symlinkSync(elsewhere, path.join(store, 'link'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const policy = { modelStore: store, allowedUrls: [] };

describe('checkModelLocation', () => {
  it('admits paths inside the model store, relative, absolute and file://', () => {
    const model = path.join(store, 'model');
    for (const location of ['model', model, `file://${model}`])
      expect(checkModelLocation(location, policy)).toEqual({ path: model, root: store });
  });

  it.each(['https://example.com/m.zip', 'http://127.0.0.1/m', 's3://bucket/m', 'ftp://x/y'])(
    'refuses the remote URL %s',
    (url) => {
      expect(() => checkModelLocation(url, policy)).toThrow(
        expect.objectContaining({ code: 'URL_NOT_ALLOWED' }),
      );
    },
  );

  it('refuses escapes and links out of the store', () => {
    for (const location of ['../elsewhere', elsewhere, 'link', `file://${elsewhere}`]) {
      expect(() => checkModelLocation(location, policy)).toThrow(
        expect.objectContaining({ code: 'URL_NOT_ALLOWED' }),
      );
    }
  });

  it('admits what allowed_urls matches, as whole-string patterns', () => {
    const allowed = { modelStore: store, allowedUrls: [`file://${root}/elsewhere`] };
    expect(checkModelLocation(elsewhere, allowed)).toEqual({ path: elsewhere, root: elsewhere });
    expect(() =>
      checkModelLocation(elsewhere, { modelStore: store, allowedUrls: ['file:///else'] }),
    ).toThrow();
  });

  it('decides containment before looking at the file system (no existence probing)', () => {
    for (const location of ['/etc/passwd', '/no/such/file', '../missing-outside'])
      expect(() => checkModelLocation(location, policy)).toThrow(
        expect.objectContaining({ code: 'URL_NOT_ALLOWED' }),
      );
  });

  it('needs a store or an allowlist, and an existing path', () => {
    expect(() => checkModelLocation(elsewhere, { modelStore: undefined, allowedUrls: [] })).toThrow(
      /model_store/,
    );
    expect(() => checkModelLocation('missing', policy)).toThrow(
      expect.objectContaining({ code: 'MODEL_NOT_FOUND' }),
    );
  });
});
