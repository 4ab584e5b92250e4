import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const PYTHON = '/usr/bin/python3';
const PYTHON_DIR = fileURLToPath(new URL('../python', import.meta.url));

const hasNumpy =
  existsSync(PYTHON) &&
  (await promisify(execFile)(PYTHON, ['-c', 'import numpy']).then(
    () => true,
    () => false,
  ));
if (!hasNumpy) console.warn(`skipping the djl_python API tests: ${PYTHON} cannot import numpy`);

describe.skipIf(!hasNumpy)('djl_python Input/Output', () => {
  it('pass their Python unit tests', async () => {
    const result = await promisify(execFile)(
      PYTHON,
      ['-B', '-m', 'unittest', 'discover', '-v', '-s', 'tests'],
      { cwd: PYTHON_DIR, env: { ...process.env, PYTHONPATH: PYTHON_DIR } },
    ).catch((error: { stderr: string }) => ({ stderr: error.stderr }));
    expect(result.stderr).toMatch(/\nOK/);
    expect(result.stderr).not.toMatch(/FAIL|ERROR/);
  });
});
