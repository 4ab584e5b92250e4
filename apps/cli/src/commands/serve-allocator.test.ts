import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { findAllocatorLibrary } from '@kiln/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnKilnServe } from '../test-support/run-binary.js';

// cpu_launcher_args=--enable_jemalloc: `kiln serve` runs the server in a child started with
// libjemalloc preloaded, and Python-mode workers get it too; SIGTERM to the command drains
// the child and the command exits with its code.
const jemalloc = (() => {
  try {
    return findAllocatorLibrary('jemalloc');
  } catch {
    return undefined;
  }
})();
const python = existsSync('/usr/bin/python3');

const HANDLER = `
import os
from djl_python import Output

def handle(inputs):
    if inputs.is_empty():
        return None
    return Output().add(str(os.getpid()))
`;

/** The processes `pid` started, from /proc. */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(/\s+/).map(Number);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!jemalloc || !python || process.platform !== 'linux')(
  'kiln serve with cpu_launcher_args=--enable_jemalloc',
  () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-cli-allocator-'));
      await writeFile(path.join(dir, 'model.py'), HANDLER);
      await writeFile(
        path.join(dir, 'config.properties'),
        'cpu_launcher_enable=true\ncpu_launcher_args=--enable_jemalloc\n',
      );
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('serves from a child with jemalloc mapped, as are its Python workers; SIGTERM drains it', async () => {
      const serve = spawnKilnServe(
        ['-f', path.join(dir, 'config.properties'), '-m', `echo=${dir}`],
        { KILN_HOME: dir },
      );
      let stderr = '';
      serve.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        serve.once('exit', (code, signal) => resolve({ code, signal })),
      );
      try {
        const deadline = Date.now() + 60_000;
        while (!/model echo READY/.test(stderr) && Date.now() < deadline) {
          expect(stderr).not.toMatch(/FAILED/);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const inference = /inference\s+(http:\/\/\S+)/.exec(stderr)?.[1];
        expect(inference).toBeDefined();
        const [server] = childrenOf(serve.pid!);
        expect(server).toBeDefined();
        expect(readFileSync(`/proc/${server}/maps`, 'utf8')).toMatch(/\/libjemalloc\.so\.2\n/);
        // The waiting command itself runs on glibc's malloc.
        expect(readFileSync(`/proc/${serve.pid}/maps`, 'utf8')).not.toMatch(/libjemalloc/);
        const response = await fetch(`${inference}/predictions/echo`, {
          method: 'POST',
          body: 'pid',
        });
        expect(response.status).toBe(200);
        const worker = Number(await response.text());
        expect(readFileSync(`/proc/${worker}/maps`, 'utf8')).toMatch(/\/libjemalloc\.so\.2\n/);

        serve.kill('SIGTERM');
        const { code } = await exited;
        expect(code).toBe(0);
        expect(stderr).toMatch(/SIGTERM: draining/);
        expect(alive(server!)).toBe(false);
        // Started once: one banner, not two.
        expect(stderr.match(/is serving/g)).toHaveLength(1);
      } finally {
        serve.kill('SIGKILL');
      }
    }, 90_000);
  },
);
