import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkEngine, isEngineRequired, requiredEngines } from './engine-requirements.js';

afterEach(() => vi.unstubAllEnvs());

describe('KILN_REQUIRE_ENGINES', () => {
  it('lists the required engines, case-insensitively, with * for all', () => {
    expect(requiredEngines({ KILN_REQUIRE_ENGINES: ' OnnxRuntime, PyTorch ,' })).toEqual([
      'OnnxRuntime',
      'PyTorch',
    ]);
    expect(isEngineRequired('pytorch', { KILN_REQUIRE_ENGINES: 'PyTorch' })).toBe(true);
    expect(isEngineRequired('DLR', { KILN_REQUIRE_ENGINES: 'PyTorch' })).toBe(false);
    expect(isEngineRequired('DLR', { KILN_REQUIRE_ENGINES: '*' })).toBe(true);
  });

  it('runs an available engine', async () => {
    expect(await checkEngine('Any', async () => null)).toEqual({ run: true, reason: undefined });
  });

  it('skips a missing engine with a printed reason', async () => {
    vi.stubEnv('KILN_REQUIRE_ENGINES', '');
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    expect(await checkEngine('Missing', async () => 'library not found')).toEqual({
      run: false,
      reason: 'library not found',
    });
    expect(warn).toHaveBeenCalledWith(
      expect.stringContaining('skipping Missing tests: library not found'),
    );
    warn.mockRestore();
  });

  it('fails a required engine that is missing, or whose probe throws', async () => {
    vi.stubEnv('KILN_REQUIRE_ENGINES', 'Missing');
    await expect(checkEngine('Missing', async () => 'library not found')).rejects.toThrow(
      /required by KILN_REQUIRE_ENGINES/,
    );
    await expect(
      checkEngine('Missing', async () => {
        throw new Error('probe crashed');
      }),
    ).rejects.toThrow(/probe crashed/);
  });
});
