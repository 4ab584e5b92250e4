import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { writeDlrModelFolder } from '@kiln/testing';
import { conformanceBinding } from './binding-support.js';
import { buildConcurrencyProbe } from './conformance-library.js';

// The conformance library must catch what it is there to catch: one handle used from two
// threads at once. A C program (not the addon, which never does this) tries it.

const run = promisify(execFile);
const binding = await conformanceBinding();

describe.skipIf(!binding)('the conformance library', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kiln-dlr-probe-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('fails loudly and counts a handle used from two threads at once', async () => {
    const probe = await buildConcurrencyProbe();
    const slow = await writeDlrModelFolder(
      join(tmp, 'slow'),
      {
        op: 'affine',
        inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 4] }],
        outputs: [{ name: 'y', dtype: 'float32', shape: [-1, 2] }],
        runDelayMs: 300,
      },
      {
        weight: { dtype: 'float32', shape: [4, 2], data: [1, 0, 0, 1, 1, 0, 0, 1] },
        bias: { dtype: 'float32', shape: [2], data: [0, 0] },
      },
    );
    const stats = await writeDlrModelFolder(join(tmp, 'stats'), {
      op: 'stats',
      inputs: [],
      outputs: [{ name: 'counters', dtype: 'int64', shape: [6] }],
    });
    const { stdout } = await run(probe, [binding!.libraryPath, slow, stats], { timeout: 30_000 });
    const result = JSON.parse(stdout) as {
      statuses: number[];
      concurrentUses: number;
      error: string;
    };
    expect([...result.statuses].sort()).toEqual([-1, 0]);
    expect(result.concurrentUses).toBe(1);
    expect(result.error).toContain(
      'RunDLRModel: the model handle is used from two threads at once',
    );
  });
});
