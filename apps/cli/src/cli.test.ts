import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { STACK_TRACE, kiln } from './test-support/run-binary.js';

describe.concurrent('kiln (the real binary)', () => {
  it('lists every command in --help and exits 0', async () => {
    const { code, stdout } = await kiln(['--help']);
    expect(code).toBe(0);
    for (const command of ['serve', 'predict', 'inspect', 'archive', 'profile', 'bench']) {
      expect(stdout).toMatch(new RegExp(`^\\s+${command}\\b`, 'm'));
    }
  });

  it('runs in a Node started with the old-space floor that keeps large bodies from forcing full GCs', async () => {
    // A preload that reports the flags of the Node process the shebang started.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-execargv-'));
    const preload = path.join(dir, 'report-flags.cjs');
    fs.writeFileSync(
      preload,
      'process.stderr.write(`execArgv=${JSON.stringify(process.execArgv)}\\n`);\n',
    );
    try {
      const { code, stderr } = await kiln(['--help'], {
        env: { NODE_OPTIONS: `--require ${preload}` },
      });
      expect(code).toBe(0);
      const execArgv = JSON.parse(/execArgv=(.*)/.exec(stderr)![1]!) as string[];
      expect(execArgv).toContain('--initial-old-space-size=128');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('answers an unknown command or option with exit code 2 and no stack trace', async () => {
    const unknown = await kiln(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command 'frobnicate'/);
    const option = await kiln(['inspect', '--frobnicate', 'x']);
    expect(option.code).toBe(2);
    expect(option.stderr).toMatch(/unknown option '--frobnicate'/);
    expect(unknown.stderr + option.stderr).not.toMatch(STACK_TRACE);
  });
});
