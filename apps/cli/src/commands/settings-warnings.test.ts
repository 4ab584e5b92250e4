import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import { STACK_TRACE, kiln, spawnKilnServe } from '../test-support/run-binary.js';
import { waitFor } from '../test-support/wait-for-output.js';

const run = await ortAvailable();

/** serving.properties keys that do nothing on an ONNX model, one of each kind. */
const DO_NOTHING = [
  'option.mapLocation=false',
  'option.extraFiles=labels.txt',
  'option.disablePerSessionThreads=true',
  'log_model_metric=true',
  'required_memory_mb=1024',
  'max_wokers=2',
];
const WARNINGS = [
  /warning: serving\.properties of warned: option\.mapLocation is an option of the PyTorch engine: OnnxRuntime ignores it/,
  /warning: serving\.properties of warned: option\.extraFiles is an option of the PyTorch engine: OnnxRuntime ignores it/,
  /warning: serving\.properties of warned: option\.disablePerSessionThreads is not supported by Kiln, ignored: onnxruntime-node has no global thread pools/,
  /warning: serving\.properties of warned: log_model_metric is not supported by Kiln, ignored/,
  /warning: serving\.properties of warned: required_memory_mb is not supported by Kiln, ignored/,
  /warning: serving\.properties of warned: unknown key max_wokers \(did you mean maxWorkers\?\)/,
];
const LMI_DIST =
  /option\.rolling_batch=lmi-dist: Kiln has no lmi-dist backend: use auto or scheduler/;

describe.skipIf(!run).concurrent('settings Kiln does not act on', () => {
  let models: TestModels;
  let warned: string;
  let lmi: string;
  let customOps: string;

  /** A copy of the tiny model whose serving.properties gets `lines`. */
  const variant = (name: string, lines: readonly string[]) => {
    const dir = path.join(models.root, name);
    cpSync(models.tiny, dir, { recursive: true });
    appendFileSync(path.join(dir, 'serving.properties'), `${lines.join('\n')}\n`);
    return dir;
  };

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-settings-');
    warned = variant('warned', DO_NOTHING);
    lmi = variant('lmi', ['option.rolling_batch=lmi-dist']);
    customOps = variant('customops', ['option.customOpLibrary=libcustom_ops.so']);
  });
  afterAll(async () => {
    await models?.remove();
  });

  it('kiln predict names each key that does nothing, and still answers', async () => {
    const { code, stdout, stderr } = await kiln(['predict', '-m', warned, '-i', '-'], {
      input: '[[1, 2, 3, 4]]',
    });
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toHaveLength(1);
    for (const warning of WARNINGS) expect(stderr).toMatch(warning);
  });

  it('kiln predict names a mistyped --option too', async () => {
    const { code, stderr } = await kiln(
      ['predict', '-m', models.tiny, '-i', '-', '--option', 'option.intraOpNumThread=1'],
      { input: '[[1, 2, 3, 4]]' },
    );
    expect(code).toBe(0);
    expect(stderr).toMatch(
      /warning: serving\.properties of tiny: unknown key option\.intraOpNumThread \(did you mean option\.intraOpNumThreads\?\)/,
    );
  });

  it('kiln inspect names them on stderr and in its JSON report', async () => {
    const { code, stdout, stderr } = await kiln(['--json', 'inspect', warned]);
    expect(code).toBe(0);
    for (const warning of WARNINGS) expect(stderr).toMatch(warning);
    const report = JSON.parse(stdout);
    expect(report.settings.errors).toEqual([]);
    expect(report.settings.warnings).toHaveLength(WARNINGS.length);
    expect(report.loaded.device).toBe('cpu');
  });

  it('kiln predict and inspect refuse rolling_batch=lmi-dist with one clear line', async () => {
    const predict = await kiln(['predict', '-m', lmi, '-i', '-'], { input: '[[1, 2, 3, 4]]' });
    expect(predict.code).toBe(1);
    expect(predict.stderr).toMatch(
      /^error: model lmi: serving\.properties asks for what Kiln cannot do: /m,
    );
    expect(predict.stderr).toMatch(LMI_DIST);
    const inspect = await kiln(['inspect', lmi]);
    expect(inspect.code).toBe(1);
    expect(inspect.stderr).toMatch(LMI_DIST);
    // Without a load, the report says what a load would refuse.
    const noLoad = await kiln(['--json', 'inspect', lmi, '--no-load']);
    expect(noLoad.code).toBe(0);
    expect(JSON.parse(noLoad.stdout).settings.errors).toEqual([expect.stringMatching(LMI_DIST)]);
    expect(predict.stderr + inspect.stderr).not.toMatch(STACK_TRACE);
  });

  it('kiln predict refuses a customOpLibrary that does not exist', async () => {
    const { code, stderr } = await kiln(['predict', '-m', customOps, '-i', '-'], {
      input: '[[1, 2, 3, 4]]',
    });
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /^error: model customops: .*option\.customOpLibrary=libcustom_ops\.so: libcustom_ops\.so does not exist/m,
    );
  });
});

describe.skipIf(!run)('kiln serve with settings it does not act on', () => {
  let models: TestModels;
  let home: string;
  let server: ChildProcessWithoutNullStreams;
  let management: string;
  let token: string;
  let stderr = '';
  let stdout = '';

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-serve-settings-');
    home = mkdtempSync(path.join(os.tmpdir(), 'kiln-cli-serve-settings-home-'));
    const warned = path.join(models.root, 'warned');
    cpSync(models.tiny, warned, { recursive: true });
    appendFileSync(path.join(warned, 'serving.properties'), `${DO_NOTHING.join('\n')}\n`);
    const lmi = path.join(models.root, 'lmi');
    cpSync(models.tiny, lmi, { recursive: true });
    appendFileSync(path.join(lmi, 'serving.properties'), 'option.rolling_batch=lmi-dist\n');
    const customOps = path.join(models.root, 'customops');
    cpSync(models.tiny, customOps, { recursive: true });
    appendFileSync(
      path.join(customOps, 'serving.properties'),
      `option.customOpLibrary=${path.join(models.root, 'nowhere', 'libops.so')}\n`,
    );
    const config = path.join(home, 'config.properties');
    writeFileSync(config, 'batch_sise=4\nnumber_of_netty_threads=8\n');
    server = spawnKilnServe(['-m', warned, '-m', lmi, '--model-store', models.root, '-f', config], {
      KILN_HOME: home,
    });
    server.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    server.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const listening = waitFor(server, /management\s+(\S+)\n[\s\S]*?management key (\S+)/, 60_000);
    const settled = waitFor(
      server,
      /model warned READY[\s\S]*model lmi FAILED|model lmi FAILED[\s\S]*model warned READY/,
      60_000,
    );
    [, management, token] = (await listening) as string[] as [string, string, string];
    await settled;
  });
  afterAll(async () => {
    if (server && server.exitCode === null) server.kill('SIGKILL');
    await models?.remove();
    rmSync(home, { recursive: true, force: true });
  });

  it('prints config.properties keys that do nothing, naming the closest known key', () => {
    expect(stderr).toMatch(
      /warning: \S+config\.properties: unknown key batch_sise \(did you mean batch_size\?\)/,
    );
    expect(stderr).toMatch(
      /warning: \S+config\.properties: number_of_netty_threads is not supported by Kiln, ignored/,
    );
  });

  it("prints a model's warnings under it and in the JSON log, and serves it", () => {
    for (const warning of WARNINGS) expect(stderr).toMatch(warning);
    const logged = stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; model?: string; msg: string })
      .filter((line) => line.model === 'warned' && line.level === 40);
    expect(logged.map((line) => line.msg)).toHaveLength(WARNINGS.length);
  });

  it('fails the load of rolling_batch=lmi-dist with a clear reason', () => {
    expect(stderr).toMatch(new RegExp(`model lmi FAILED: .*${LMI_DIST.source}`));
  });

  it('refuses a missing customOpLibrary over HTTP without showing server paths', async () => {
    const response = await fetch(`${management}/models?url=customops&synchronous=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    const text = await response.text();
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(text).toMatch(/option\.customOpLibrary=libops\.so: libops\.so does not exist/);
    expect(text).not.toContain(models.root);
    expect(text).not.toContain(os.tmpdir());
  });
});
