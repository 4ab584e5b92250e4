import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import { STACK_TRACE, kiln } from '../test-support/run-binary.js';

const run = await ortAvailable();

describe.concurrent('kiln bench', () => {
  it('shows kiln-bench help under its kiln name', async () => {
    const { code, stdout } = await kiln(['bench', '--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^Usage: kiln bench \[options\]/);
    expect(stdout).toMatch(/kiln bench -u \.\/models\/resnet18 -s 1,3,224,224 -c 200 -t 2/);
  });
});

describe.skipIf(!run).concurrent('kiln bench on a real model', () => {
  let models: TestModels;

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-bench-');
  });
  afterAll(async () => {
    await models?.remove();
  });

  it('runs in process and gives JSON (kiln --json before bench counts too) and an HTML report', async () => {
    const html = path.join(models.root, 'report.html');
    const { code, stdout, stderr } = await kiln([
      '--json',
      'bench',
      '-u',
      models.mlp,
      '-s',
      '(1,16)f',
      '-c',
      '30',
      '-w',
      '3',
      '-t',
      '2',
      '--html',
      html,
    ]);
    expect(code).toBe(0);
    expect(stderr).toBe(`wrote ${html}\n`);
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({
      kind: 'in-process',
      model: 'mlp',
      workers: 2,
      iterations: 30,
      errors: 0,
    });
    expect(result.latency.inference.count).toBe(30);
    expect(await readFile(html, 'utf8')).toMatch(/<svg[^>]+class="kiln-chart"/);
  });

  it('fails for a missing model with exit code 1', async () => {
    const { code, stderr } = await kiln([
      'bench',
      '-u',
      path.join(models.root, 'nope'),
      '-s',
      '1,4',
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/^error: no model at .*nope/);
    expect(stderr).not.toMatch(STACK_TRACE);
  });
});
