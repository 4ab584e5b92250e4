import { execFileSync } from 'node:child_process';

/**
 * Null when `pythonExecutable` runs and imports numpy (which the tests' handlers use), else
 * why not (for checkEngine in tests).
 */
export function probePython(pythonExecutable: string): Promise<string | null> {
  try {
    execFileSync(pythonExecutable, ['-c', 'import numpy'], { stdio: 'ignore' });
    return Promise.resolve(null);
  } catch {
    return Promise.resolve(
      `${pythonExecutable} cannot import numpy (apt-get install python3-numpy)`,
    );
  }
}
