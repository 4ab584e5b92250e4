import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import { STACK_TRACE, kiln } from '../test-support/run-binary.js';

const run = await ortAvailable();

describe.skipIf(!run).concurrent('kiln archive', () => {
  let models: TestModels;

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-archive-');
  });
  afterAll(async () => {
    await models?.remove();
  });

  it('packs the Iris demo into a zip that kiln predict then serves', async () => {
    const target = path.join(models.root, 'iris.zip');
    const packed = await kiln(['archive', models.iris, '-o', target]);
    expect(packed.stderr).toBe('');
    expect(packed.code).toBe(0);
    expect(packed.stdout).toMatch(/^packed 4 files \([\d.]+ KiB\) into .*iris\.zip/);
    expect(packed.stdout).toMatch(
      /checked: model loads and its translator resolves, archive reads back as the folder/,
    );
    const predicted = await kiln(['predict', '-m', target, '-i', '-'], {
      input: '[6.7, 3.0, 5.2, 2.3]',
    });
    expect(predicted.code).toBe(0);
    expect(JSON.parse(predicted.stdout)[0].className).toBe('virginica');
  });

  it('writes a tar.gz and reports it as JSON', async () => {
    const target = path.join(models.root, 'mlp.tar.gz');
    const { code, stdout } = await kiln(['--json', 'archive', models.mlp, '-o', target]);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({
      format: 'tar.gz',
      files: 2,
      engine: 'OnnxRuntime',
      loaded: true,
    });
    expect(existsSync(target)).toBe(true);
  });

  it('refuses to replace an archive without --force, or to write inside the folder', async () => {
    const target = path.join(models.root, 'tiny.zip');
    expect((await kiln(['archive', models.tiny, '-o', target, '--no-load'])).code).toBe(0);
    const again = await kiln(['archive', models.tiny, '-o', target]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/tiny\.zip exists\nhint: pass --force/);
    const inside = await kiln(['archive', models.tiny, '-o', path.join(models.tiny, 'tiny.zip')]);
    expect(inside.code).toBe(1);
    expect(inside.stderr).toMatch(/is inside the folder it would pack/);
    expect(again.stderr + inside.stderr).not.toMatch(STACK_TRACE);
  });

  it('fails for a missing folder with exit code 1', async () => {
    const missing = await kiln([
      'archive',
      path.join(models.root, 'nope'),
      '-o',
      path.join(models.root, 'nope.zip'),
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error: no model folder at .*nope/);
    expect(missing.stderr).not.toMatch(STACK_TRACE);
  });
});
