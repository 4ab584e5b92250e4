import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { checkModelSettings, servingPropertiesFrom } from '@kiln/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provider } from './provider.js';

describe("the OnnxRuntime provider's option declarations", () => {
  let dir: string;
  const check = (raw: Record<string, string>) =>
    checkModelSettings(servingPropertiesFrom(raw), {
      engine: provider,
      providers: [provider],
      translatorArguments: [],
      modelDir: dir,
    });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-ort-options-'));
    await writeFile(path.join(dir, 'libcustom_ops.so'), 'not really a library');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('knows the keys parseSessionConfig reads, and names the closest for a typo', () => {
    expect(
      check({ 'option.intraOpNumThreads': '2', 'option.optLevel': 'BASIC_OPT' }).warnings,
    ).toEqual([]);
    expect(check({ 'option.interOpNumThread': '2' }).warnings.map((w) => w.message)).toEqual([
      'unknown key option.interOpNumThread (did you mean option.interOpNumThreads?)',
    ]);
  });

  it('warns that disablePerSessionThreads is not supported', () => {
    expect(check({ 'option.disablePerSessionThreads': 'true' })).toEqual({
      warnings: [
        {
          key: 'option.disablePerSessionThreads',
          message: expect.stringMatching(
            /^option\.disablePerSessionThreads is not supported by Kiln, ignored: onnxruntime-node has no global thread pools/,
          ),
        },
      ],
      errors: [],
    });
  });

  it('refuses a customOpLibrary, missing or not, without showing its folder', () => {
    const missing = check({ 'option.customOpLibrary': path.join(dir, 'nope', 'libmissing.so') });
    expect(missing.errors).toEqual([
      'option.customOpLibrary=libmissing.so: libmissing.so does not exist (a relative name is read in the model folder)',
    ]);
    const present = check({ 'option.customOpLibrary': 'libcustom_ops.so' });
    expect(present.errors).toEqual([
      'option.customOpLibrary=libcustom_ops.so: onnxruntime-node cannot register custom operator libraries, so Kiln cannot load libcustom_ops.so',
    ]);
    expect([...missing.errors, ...present.errors].join()).not.toContain(dir);
  });
});
