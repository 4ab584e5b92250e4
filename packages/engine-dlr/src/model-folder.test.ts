import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KilnError } from '@kiln/core';
import { inspectDlrFolder, isDlrModelListing } from './model-folder.js';

describe('DLR model folders', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kiln-dlr-folder-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('recognizes a compiled library with a graph and params, or with Relay VM code', () => {
    expect(
      isDlrModelListing(['model.so', 'model.json', 'model.params', 'serving.properties']),
    ).toBe(true);
    expect(isDlrModelListing(['compiled.so', 'compiled.ro', 'compiled.meta'])).toBe(true);
    expect(isDlrModelListing(['model.so', 'model.params'])).toBe(false);
    expect(isDlrModelListing(['model.json', 'model.params'])).toBe(false);
    // A PyTorch folder with a custom-op library and a config is not a TVM model.
    expect(isDlrModelListing(['model.pt', 'config.json', 'libops.so'])).toBe(false);
    // DLR reads only the folder itself, and skips SageMaker's side files.
    expect(isDlrModelListing(['sub/model.so', 'model.json', 'model.params'])).toBe(false);
    expect(isDlrModelListing(['model.so', 'hyperparams.json', 'model.params'])).toBe(false);
  });

  it('says what a folder lacks', async () => {
    const dir = mkdtempSync(join(tmp, 'partial-'));
    writeFileSync(join(dir, 'model.json'), '{}');
    const error = await inspectDlrFolder(dir).catch((e: unknown) => e);
    expect(KilnError.is(error, 'MODEL_LOAD_FAILED')).toBe(true);
    expect((error as Error).message).toContain('a compiled library (.so), parameters (.params)');
    expect((error as Error).message).toContain('has: model.json');
  });

  it('refuses folders it cannot read and paths DLR would split', async () => {
    await expect(inspectDlrFolder(join(tmp, 'absent'))).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
    });
    await expect(inspectDlrFolder(join(tmp, 'a:b'))).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });
});
