import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const child = fileURLToPath(new URL('./test-support/load-engine-child.ts', import.meta.url));
const hideOrt = new URL('./test-support/hide-ort.mjs', import.meta.url).href;

async function loadInChild(
  extraImports: string[],
): Promise<{ ok: boolean; code?: string; message?: string }> {
  const { stdout } = await run(process.execPath, [
    '--conditions=@kiln/source',
    '--import',
    'tsx',
    ...extraImports.flatMap((i) => ['--import', i]),
    child,
  ]);
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as {
    ok: boolean;
    code?: string;
    message?: string;
  };
}

describe('loading onnxruntime-node', () => {
  it('says why and how to fix it when onnxruntime-node is missing', async () => {
    const result = await loadInChild([hideOrt]);
    expect(result.ok).toBe(false);
    expect(result.code).toBe('ENGINE_UNAVAILABLE');
    expect(result.message).toMatch(/Cannot find (?:package|module) 'onnxruntime-node'/);
    expect(result.message).toMatch(/npm install onnxruntime-node/);
  });

  it('imports onnxruntime-node only when the engine is loaded', async () => {
    const { stdout } = await run(process.execPath, [
      '--conditions=@kiln/source',
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      `import '${new URL('./index.ts', import.meta.url).href}';
       import { createRequire } from 'node:module';
       const loaded = Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes('onnxruntime'));
       console.log(JSON.stringify({ loaded }));`,
    ]);
    expect(JSON.parse(stdout.trim())).toEqual({ loaded: false });
  });
});
