import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pythonTorchUnavailable, trainTinyGpt } from './tiny-gpt.js';

const unavailable = pythonTorchUnavailable();
if (unavailable) console.warn(`[kiln] skipping the tiny GPT training script: ${unavailable}`);

const TEXT = `In the beginning God created the heaven and the earth.
And the earth was without form, and void; and darkness was upon the face of the deep.


And God said, Let there be light: and there was light.
And God saw the light, that it was good: and God divided the light from the darkness.
`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kiln-tiny-gpt-test-'));
  await writeFile(join(dir, 'text.txt'), TEXT);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const sha = async (file: string) =>
  createHash('sha256')
    .update(await readFile(file))
    .digest('hex');

describe.skipIf(unavailable !== null)('train_tiny_gpt.py', () => {
  // A few steps of a very small model on a short text: the files and their layout, not quality.
  const options = () => ({
    text: join(dir, 'text.txt'),
    steps: 3,
    merges: 20,
    hidden: 32,
    heads: 2,
    positions: 64,
    cacheDir: dir,
  });

  it('writes a model folder with GPT-2 tokenizer files, trained the same way every time', async () => {
    const first = await trainTinyGpt(options());
    expect(first.cached).toBe(false);
    const vocab = JSON.parse(await readFile(join(first.dir, 'vocab.json'), 'utf8')) as Record<
      string,
      number
    >;
    const merges = (await readFile(join(first.dir, 'merges.txt'), 'utf8')).trim().split('\n');
    expect(merges[0]).toMatch(/^#version/);
    expect(merges).toHaveLength(21);
    expect(Object.keys(vocab)).toHaveLength(256 + 20 + 1);
    const config = JSON.parse(await readFile(join(first.dir, 'config.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(config).toMatchObject({
      n_positions: 64,
      vocab_size: 277,
      eos_token_id: vocab['<|endoftext|>'],
    });
    expect(await readFile(join(first.dir, 'serving.properties'), 'utf8')).toContain(
      'option.rolling_batch=auto',
    );
    expect(first.training).toMatchObject({ documents: 2, steps: 3 });

    // Cached by script and arguments; retrained elsewhere, the same bytes.
    expect((await trainTinyGpt(options())).cached).toBe(true);
    const again = await trainTinyGpt({ ...options(), cacheDir: join(dir, 'again') });
    expect(again.cached).toBe(false);
    for (const file of ['model.onnx', 'vocab.json', 'merges.txt'])
      expect(await sha(join(again.dir, file))).toBe(await sha(join(first.dir, file)));
  }, 180_000);
});
