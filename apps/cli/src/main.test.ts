import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { runKiln } from './cli.js';

/** Runs `kiln` in this process, collecting what it writes (for checks that need no child). */
async function kilnHere(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = vi
    .spyOn(process.stdout, 'write')
    .mockImplementation((chunk) => ((stdout += String(chunk)), true));
  const err = vi
    .spyOn(process.stderr, 'write')
    .mockImplementation((chunk) => ((stderr += String(chunk)), true));
  try {
    const code = await runKiln(argv);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe('kiln command line (in process)', () => {
  let exitCode: typeof process.exitCode;
  beforeEach(() => {
    exitCode = process.exitCode;
  });
  afterEach(() => {
    process.exitCode = exitCode;
  });

  it.each(['serve', 'predict', 'inspect', 'archive', 'profile'])(
    'documents %s with examples',
    async (command) => {
      const { code, stdout } = await kilnHere([command, '--help']);
      expect(code).toBe(0);
      expect(stdout).toMatch(new RegExp(`^Usage: kiln ${command}`));
      expect(stdout).toMatch(new RegExp(`Examples:\\n\\s+kiln ${command} `));
    },
  );

  it.each([
    [
      ['archive', 'm', '-o', 'm.rar'],
      /^error: cannot tell the archive format of m\.rar\nhint: name it model\.zip/,
    ],
    [['archive', 'm'], /required option '-o, --output <file>'/],
    [['archive', 'm', '-o', 'm.zip', '--level', '12'], /^error: --level 12 must be 0 to 9/],
    [
      ['archive', 'm', '-o', '/nonexistent/dir/m.zip'],
      /^error: the folder of \/nonexistent\/dir\/m\.zip does not exist/,
    ],
    [['inspect', 'm', '--option', 'batch_size'], /^error: --option batch_size is not key=value/],
    [
      ['profile', '-m', 'm', '-s', '(1,4)q'],
      /^error: bad input shape "\(1,4\)q": unknown dtype suffix "q"/,
    ],
    [['profile', '-m', 'm', '--runs', '0'], /^error: --runs 0 must be a whole number from 1/],
    [['profile'], /required option '-m, --model <url>'/],
    [['predict', '-i', 'x.npy'], /^error: required option '-m, --model <url>' not specified/],
    [['predict', '--bogus'], /^error: unknown option '--bogus'/],
    [['inspect'], /missing required argument 'model'/],
    [['bench', '-u', 'm', '-c', 'many'], /^error: -c "many" must be a whole number/],
  ])('answers %j with exit code 2 and one clear line', async (argv, message) => {
    const { code, stderr } = await kilnHere(argv);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr).not.toMatch(/\n\s+at /);
  });

  it.each([
    [['--json', 'archive', 'm', '-o', 'm.rar'], 'cannot tell the archive format of m.rar'],
    [['predict', '--bogus', '--json'], "unknown option '--bogus'"],
    [['--json', 'profile'], "required option '-m, --model <url>' not specified"],
    [['--json'], 'name a command: serve, predict, inspect, archive, profile or bench'],
  ])('answers %j with one JSON error on stderr and exit code 2', async (argv, message) => {
    const { code, stdout, stderr } = await kilnHere(argv);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(stderr)).toEqual({
      error: { code: 'USAGE', message, hint: expect.any(String) },
    });
  });

  it('answers a failing command under --json with its error code, message and hint', async () => {
    const { code, stdout, stderr } = await kilnHere(['--json', 'inspect', '/nonexistent/model']);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    const { error } = JSON.parse(stderr) as { error: Record<string, string> };
    expect(error).toEqual({
      code: 'MODEL_NOT_FOUND',
      message: expect.stringMatching(/^no model at .*\/nonexistent\/model/),
      hint: expect.stringMatching(/^check the path or URL/),
    });
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});
