import { access, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './cli-commands.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-make-models-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function run(...args: string[]): Promise<{ code: number; output: string }> {
  const lines: string[] = [];
  const code = await runCli(args, (line) => lines.push(line));
  return { code, output: lines.join('\n') };
}

describe('kiln-make-models', () => {
  it('writes the model a command names', async () => {
    const dir = join(root, 'encoder');
    const result = await run(
      'encoder',
      dir,
      '--layers',
      '1',
      '--hidden',
      '16',
      '--heads',
      '2',
      '--vocab',
      '50',
    );
    expect(result).toEqual({
      code: 0,
      output: `${dir}: transformer encoder, hidden 16, max length 512`,
    });
    await access(join(dir, 'model.onnx'));
  });

  it('explains bad usage instead of writing anything', async () => {
    expect((await run()).code).toBe(2);
    expect(await run('identity', join(root, 'x'), '--dtype', 'complex64')).toMatchObject({
      code: 1,
      output: expect.stringMatching(/unknown dtype complex64/),
    });
    expect(await run('slow', join(root, 'y'), '--ms', '0')).toMatchObject({
      code: 1,
      output: expect.stringMatching(/positive integer/),
    });
    expect(await run('tiny', join(root, 'z'), '--nope')).toMatchObject({
      code: 2,
      output: expect.stringMatching(/Unknown option '--nope'/),
    });
    expect(await run('llama', join(root, 'w'), '--tokenizer', 'wordpiece')).toMatchObject({
      code: 1,
      output: expect.stringMatching(/--tokenizer must be chars, byte-bpe or sentencepiece/),
    });
    await expect(access(join(root, 'x'))).rejects.toThrow();
    await expect(access(join(root, 'w'))).rejects.toThrow();
  });
});
