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
