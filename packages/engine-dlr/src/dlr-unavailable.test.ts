import { describe, expect, it } from 'vitest';
import { EngineRegistry, KilnError } from '@kiln/core';
import { createDlrEngine, provider } from './provider.js';

// Needs no DLR: a missing libdlr must make the engine unavailable, naming every place looked at.

const MISSING = {
  libraryPath: '/missing/option/libdlr.so',
  env: { KILN_DLR_LIBRARY: '/missing/env/libdlr.so' },
};

describe('the DLR engine without libdlr', () => {
  it('reports itself unavailable, naming every place it looked and how to fix it', async () => {
    const error = await createDlrEngine(MISSING)
      .load()
      .catch((e: unknown) => e);
    expect(KilnError.is(error, 'ENGINE_UNAVAILABLE')).toBe(true);
    const message = (error as Error).message;
    // Without the addon built, the message lists where the addon was looked for instead.
    if (message.includes('kiln_dlr.node')) {
      expect(message).toContain('npm run build -w @kiln/dlr-native');
      return;
    }
    for (const place of [
      '/missing/option/libdlr.so (libraryPath option): not found',
      '/missing/env/libdlr.so (KILN_DLR_LIBRARY): not found',
      'libdlr.so (system dynamic loader',
      '/usr/local/lib/libdlr.so (conventional folder): not found',
      '/usr/lib/libdlr.so (conventional folder): not found',
    ]) {
      expect(message).toContain(place);
    }
    expect(message).toContain('set KILN_DLR_LIBRARY');
  });

  it('is skipped by the registry with that reason when another engine is asked for by files', async () => {
    const registry = new EngineRegistry({});
    registry.register(createDlrEngine(MISSING));
    const named = await registry.get('DLR').catch((e: unknown) => e);
    expect(KilnError.is(named, 'ENGINE_UNAVAILABLE')).toBe(true);
    expect((named as Error).message).toContain(
      '/missing/env/libdlr.so (KILN_DLR_LIBRARY): not found',
    );
    const byFiles = await registry
      .forModelFiles(['model.so', 'model.json', 'model.params'])
      .catch((e: unknown) => e);
    expect(KilnError.is(byFiles, 'ENGINE_UNAVAILABLE')).toBe(true);
    expect((byFiles as KilnError).details?.reasons).toHaveProperty('DLR');
  });

  it('is a provider named DLR that recognizes TVM-compiled folders', () => {
    expect(provider).toMatchObject({ specificationVersion: 'kiln-engine-v1', name: 'DLR' });
    expect(provider.recognizes(['model.so', 'model.json', 'model.params'])).toBe(true);
    expect(provider.recognizes(['model.onnx'])).toBe(false);
    expect(() => createDlrEngine({ defaultThreads: 0 })).toThrow(/defaultThreads/);
  });
});
