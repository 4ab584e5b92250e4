import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Tensor, encodeNpy } from '@kiln/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import { KILN_BIN, STACK_TRACE, kiln, serveArgs, takenPort } from '../test-support/run-binary.js';

const run = await ortAvailable();

describe.skipIf(!run)('kiln serve starting with a model', () => {
  let models: TestModels;
  let home: string;

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-startup-');
    home = await mkdtemp(path.join(os.tmpdir(), 'kiln-cli-startup-home-'));
  });
  afterAll(async () => {
    await models?.remove();
    await rm(home, { recursive: true, force: true });
  });

  it('answers its startup model 503 while it loads, never 404, then 200', async () => {
    const free = await takenPort();
    await free.close();
    const server = spawn(KILN_BIN, serveArgs(['-m', `mlp=${models.mlp}`], free.port), {
      env: { ...process.env, KILN_HOME: home },
      stdio: 'ignore',
    });
    const body = encodeNpy(new Tensor('float32', new Float32Array(16).fill(0.5), [1, 16]));
    const statuses: number[] = [];
    try {
      const deadline = Date.now() + 60_000;
      while (statuses.at(-1) !== 200 && Date.now() < deadline) {
        try {
          const response = await fetch(`http://127.0.0.1:${free.port}/predictions/mlp`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-npy' },
            body,
          });
          await response.arrayBuffer();
          statuses.push(response.status);
        } catch {
          // not listening yet
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    } finally {
      server.kill('SIGKILL');
    }
    expect(statuses.at(-1)).toBe(200);
    expect(statuses.filter((status) => status !== 503 && status !== 200)).toEqual([]);
  }, 90_000);

  it('stops loading its model and exits 1 when it cannot listen', async () => {
    const taken = await takenPort();
    try {
      const result = await kiln(serveArgs(['-m', `mlp=${models.mlp}`], taken.port), {
        env: { KILN_HOME: home },
        timeoutMs: 60_000,
      });
      // A model still loading would keep it running until the timeout kills it (code null).
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/cannot listen/);
      expect(result.stderr).not.toMatch(STACK_TRACE);
    } finally {
      await taken.close();
    }
  }, 90_000);
});
