// Core pinning (TorchServe's cpu_launcher_enable, a model's cpu_pinning) behind the real
// server: the model description lists each worker's cores, disjoint, and the kernel agrees —
// thread workers' and LibTorch's threads in /proc/self/task, Python workers in /proc/<pid>.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { probeLibTorch, saveScriptModule } from '@kiln/engine-libtorch';
import { buildIrisDemo } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { type TestServer, jsonOf, startTestServer, tempDir } from '../support/server-harness.js';

const linux2 = process.platform === 'linux' && os.availableParallelism() >= 2;
const torch = await checkEngine('PyTorch', probeLibTorch);
const python = (() => {
  try {
    execFileSync('/usr/bin/python3', ['-c', 'import os; os.sched_setaffinity'], {
      stdio: 'ignore',
    });
    return true;
  } catch {
    return false;
  }
})();

const root = tempDir('core-pinning');
let iris: string;
let server: TestServer | undefined;

beforeAll(async () => {
  iris = path.join(root, 'iris');
  await buildIrisDemo(iris);
});
afterEach(async () => {
  await server?.stop();
  server = undefined;
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

interface WorkerView {
  pinnedCores?: number[];
  pinError?: string;
  intraOpThreads?: number;
}

async function workersOf(name: string): Promise<WorkerView[]> {
  const [model] = (await jsonOf(await server!.manage(`/models/${name}`))).body as {
    workerGroups: { workers: WorkerView[] }[];
  }[];
  return model!.workerGroups.flatMap((g) => g.workers);
}

/** Cpus_allowed_list of one of /proc's status files. */
function allowed(file: string): string {
  return /^Cpus_allowed_list:\s*(\S+)/m.exec(fs.readFileSync(file, 'utf8'))?.[1] ?? '';
}

/** Cpus_allowed_list of each thread of this process (the server runs in it). */
function threadMasks(): string[] {
  const masks: string[] = [];
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      masks.push(allowed(`/proc/self/task/${tid}/status`));
    } catch {
      // Ended meanwhile.
    }
  }
  return masks;
}

/** Python workers started by this process, with their Cpus_allowed_list. */
function pythonWorkerMasks(): string[] {
  const masks: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (ppid === process.pid && cmdline.includes('kiln_python.worker'))
        masks.push(allowed(`/proc/${pid}/status`));
    } catch {
      // Ended meanwhile.
    }
  }
  return masks.sort();
}

async function classify(name: string): Promise<unknown> {
  const response = await fetch(`${server!.inference}/predictions/${name}`, {
    method: 'POST',
    body: '[6.7, 3.0, 5.2, 2.3]',
    headers: { 'content-type': 'application/json' },
  });
  const { status, body } = await jsonOf(response);
  expect(status).toBe(200);
  return body;
}

const expectDisjoint = (sets: number[][]) => {
  const all = sets.flat();
  expect(new Set(all).size).toBe(all.length);
};

describe.skipIf(!linux2)('core pinning over HTTP', () => {
  it('cpu_launcher_enable: two ONNX Runtime workers on cores of their own, answering as unpinned', async () => {
    server = await startTestServer({ models: [`iris=${iris}`] });
    await server.settled();
    const unpinned = await classify('iris');
    await server.stop();
    server = await startTestServer({
      models: [`iris=${iris}`],
      config: { cpu_launcher_enable: 'true', min_workers: '2', max_workers: '2' },
    });
    await server.settled();
    expect(await classify('iris')).toEqual(unpinned);
    const workers = await workersOf('iris');
    expect(workers).toHaveLength(2);
    const sets = workers.map((w) => w.pinnedCores!);
    expectDisjoint(sets);
    expect(sets.every((s) => s.length === sets[0]!.length)).toBe(true);
    expect(workers.map((w) => w.intraOpThreads)).toEqual([sets[0]!.length, sets[0]!.length]);
    // On a 2-core machine, one core each; the kernel keeps a thread on each alone.
    if (os.availableParallelism() === 2) {
      expect(sets.sort()).toEqual([[0], [1]]);
      expect(threadMasks()).toEqual(expect.arrayContaining(['0', '1']));
    }
  });

  /** Iris pinned as if two instances shared the machine: one worker, half the cores. */
  async function startIrisOnHalfTheCores(): Promise<TestServer> {
    const started = await startTestServer({
      models: [`iris=${iris}`],
      config: {
        cpu_launcher_enable: 'true',
        cpu_launcher_args: '--ninstances 2',
        min_workers: '1',
        max_workers: '1',
      },
    });
    await started.settled();
    return started;
  }

  it('leaves the event loop the cores no worker took (--ninstances 2, one worker), until the model goes', async () => {
    server = await startIrisOnHalfTheCores();
    const [worker] = await workersOf('iris');
    const eventLoop = server.server.models.eventLoopCores!;
    expect(eventLoop.length).toBeGreaterThanOrEqual(1);
    expect(eventLoop.some((c) => worker!.pinnedCores!.includes(c))).toBe(false);
    // The main thread (its task id is the process id) runs there alone.
    expect(allowed(`/proc/self/task/${process.pid}/status`)).toBe(eventLoop.join(','));
    await classify('iris');
    expect((await server.manage('/models/iris', { method: 'DELETE' })).status).toBe(200);
    expect(server.server.models.eventLoopCores).toBeUndefined();
    expect(allowed(`/proc/self/task/${process.pid}/status`)).toBe(
      `0-${os.availableParallelism() - 1}`,
    );
  });

  it('gives the main thread every core back when the server stops', async () => {
    server = await startIrisOnHalfTheCores();
    expect(server.server.models.eventLoopCores).toBeDefined();
    const stopping = server;
    server = undefined;
    await stopping.stop();
    expect(stopping.server.models.eventLoopCores).toBeUndefined();
    expect(allowed(`/proc/self/task/${process.pid}/status`)).toBe(
      `0-${os.availableParallelism() - 1}`,
    );
  });

  it('refuses a NUMA node the machine lacks, with the reason and no server path', async () => {
    const node = path.join(root, 'node9');
    fs.cpSync(iris, node, { recursive: true });
    fs.appendFileSync(
      path.join(node, 'serving.properties'),
      '\ncpu_pinning=true\ncpu_pinning_node=9\n',
    );
    server = await startTestServer({ config: { allowed_urls: '.*' } });
    const response = await server.manage(
      `/models?url=${encodeURIComponent(node)}&model_name=node9&synchronous=true`,
      { method: 'POST' },
    );
    const { status, body } = await jsonOf(response);
    expect(status).toBeGreaterThanOrEqual(400);
    const text = JSON.stringify(body);
    expect(text).toMatch(/NUMA node 9 does not exist/);
    expect(text).not.toContain(root);
  });

  it.skipIf(!torch.run)(
    'pins each LibTorch context’s forward thread (cpu_pinning=true)',
    async () => {
      const dir = path.join(root, 'affine');
      fs.mkdirSync(dir);
      await saveScriptModule(path.join(dir, 'model.pt'), {
        source: 'def forward(self, x: Tensor) -> Tensor:\n    return x * 2.0 + 1.0\n',
        parameters: {},
      });
      fs.writeFileSync(
        path.join(dir, 'serving.properties'),
        'engine=PyTorch\ncpu_pinning=true\nminWorkers=2\nmaxWorkers=2\nbatch_size=1\n',
      );
      server = await startTestServer({ models: [`affine=${dir}`] });
      await server.settled();
      const workers = await workersOf('affine');
      const sets = workers.map((w) => w.pinnedCores!);
      expect(sets).toHaveLength(2);
      expectDisjoint(sets);
      // Both contexts run at once, so both forward threads pin themselves.
      const answers = await Promise.all(
        [1, 2, 3, 4].map(async (v) => {
          const response = await fetch(`${server!.inference}/v2/models/affine/infer`, {
            method: 'POST',
            body: JSON.stringify({
              inputs: [{ name: 'x', shape: [1, 2], datatype: 'FP32', data: [v, -v] }],
            }),
          });
          const { status, body } = await jsonOf(response);
          expect(status).toBe(200);
          return (body as { outputs: { data: number[] }[] }).outputs[0]!.data;
        }),
      );
      expect(answers).toEqual([1, 2, 3, 4].map((v) => [2 * v + 1, -2 * v + 1]));
      if (os.availableParallelism() === 2)
        expect(threadMasks()).toEqual(expect.arrayContaining(['0', '1']));
    },
  );

  it.skipIf(!python)('pins Python workers: each process runs on its own cores alone', async () => {
    const dir = path.join(root, 'py');
    fs.mkdirSync(dir);
    fs.writeFileSync(
      path.join(dir, 'model.py'),
      'import os\nfrom djl_python import Output\n\ndef handle(inputs):\n    if inputs.is_empty():\n        return None\n    return Output().add(",".join(map(str, sorted(os.sched_getaffinity(0)))))\n',
    );
    fs.writeFileSync(
      path.join(dir, 'serving.properties'),
      'engine=Python\noption.pythonExecutable=/usr/bin/python3\ncpu_pinning=true\nminWorkers=2\nmaxWorkers=2\n',
    );
    server = await startTestServer({ models: [`py=${dir}`] });
    await server.settled();
    const sets = (await workersOf('py')).map((w) => w.pinnedCores!);
    expect(sets).toHaveLength(2);
    expectDisjoint(sets);
    // What the kernel says of each worker process equals what the description lists.
    expect(pythonWorkerMasks()).toEqual(sets.map((s) => s.join(',')).sort());
    const response = await fetch(`${server.inference}/predictions/py`, {
      method: 'POST',
      body: 'x',
    });
    expect(response.status).toBe(200);
    expect(sets.map((s) => s.join(','))).toContain(await response.text());
  });
});
