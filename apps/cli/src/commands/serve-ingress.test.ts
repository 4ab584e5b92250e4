import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import {
  STACK_TRACE,
  kiln,
  serveArgs,
  spawnKilnServe,
  takenPort,
} from '../test-support/run-binary.js';
import { waitFor } from '../test-support/wait-for-output.js';

const run = await ortAvailable();

/**
 * One request's status, on a connection of its own so that the primary hands each to the next
 * process.
 */
function statusOf(
  method: string,
  url: string,
  { body, headers = {} }: { body?: string; headers?: Record<string, string> } = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, agent: false, headers }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', reject);
    request.end(body);
  });
}

async function statuses(url: string, body: string, count: number): Promise<number[]> {
  const all: number[] = [];
  for (let i = 0; i < count; i++)
    all.push(
      await statusOf('POST', url, { body, headers: { 'content-type': 'application/json' } }),
    );
  return all;
}

/** A metric's value in the (aggregated) Prometheus text. */
async function metric(metricsUrl: string, line: RegExp): Promise<number | undefined> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const match = text.match(line);
  return match ? Number(match[1]) : undefined;
}

async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const IRIS = '[[5.1, 3.5, 1.4, 0.2]]';
const PYTHON = '/usr/bin/python3';

/**
 * A Python model folder whose model.py raises MemoryError on import where `refuseWhen` (a
 * Python expression) holds, and otherwise answers every request with nothing (204).
 */
async function refusingModel(dir: string, refuseWhen: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'serving.properties'), `option.pythonExecutable=${PYTHON}\n`);
  await writeFile(
    path.join(dir, 'model.py'),
    [
      'import os',
      `if ${refuseWhen}:`,
      '    raise MemoryError("no room for this model here")',
      'def handle(inputs):',
      '    return None',
      '',
    ].join('\n'),
  );
}
const PROCESSES = /^kiln_ingress_processes (\d+)$/m;

/** `kiln serve --ingress-processes 2` of the tiny model, followed through its log. */
interface IngressServer {
  readonly server: ChildProcessWithoutNullStreams;
  readonly inference: string;
  readonly management: string;
  readonly metrics: string;
  /** The management API's key. */
  readonly token: string;
  /** Every ingress process started so far, in order. */
  readonly started: readonly number[];
  /** The process each slot runs now, by its KILN_INGRESS_INDEX. */
  readonly current: ReadonlyMap<number, number>;
  /** Whether the process now in slot `index` has logged that it listens. */
  listens(index: number): boolean;
  manage(method: string, route: string): Promise<Response>;
  /** Waits until the `count`th process has started and two processes serve again. */
  replaced(count: number): Promise<void>;
  /** Kills the server and every process it started. */
  kill(): void;
}

async function startIngressServer(models: TestModels, home: string): Promise<IngressServer> {
  const server = spawnKilnServe(
    ['-m', models.tiny, '--model-store', models.root, '--ingress-processes', '2'],
    { KILN_HOME: home },
  );
  const started: number[] = [];
  const current = new Map<number, number>();
  let output = '';
  server.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    for (const m of chunk
      .toString()
      .matchAll(/"ingress":(\d+),"processId":(\d+),"msg":"ingress process started"/g)) {
      started.push(Number(m[2]));
      current.set(Number(m[1]), Number(m[2]));
    }
  });
  const listening = waitFor(
    server,
    /serving \(2 ingress processes\)\n\s+inference\s+(http:\/\/\S+)\n\s+management\s+(\S+)\n\s+metrics\s+(http:\/\/\S+)\/metrics\n\s+management key (\S+)/,
    90_000,
  );
  const ready = waitFor(server, /model tiny READY/, 90_000);
  const [, inference, management, metrics, token] = (await listening) as string[];
  await ready;
  await until(async () => (await metric(metrics!, PROCESSES)) === 2, 60_000, 'two processes');
  return {
    server,
    inference: inference!,
    management: management!,
    metrics: metrics!,
    token: token!,
    started,
    current,
    listens: (index) =>
      output
        .split('\n')
        .some(
          (line) =>
            line.includes(`"pid":${current.get(index)},`) && line.includes('"msg":"listening"'),
        ),
    manage: (method, route) =>
      fetch(`${management}${route}`, { method, headers: { authorization: `Bearer ${token}` } }),
    async replaced(count) {
      await until(async () => started.length === count, 30_000, 'a replacement process');
      await until(
        async () => (await metric(metrics!, PROCESSES)) === 2,
        60_000,
        'two processes again',
      );
    },
    kill() {
      if (server.exitCode === null) server.kill('SIGKILL');
      for (const pid of started) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}

describe.skipIf(!run)('kiln serve --ingress-processes 2', () => {
  let models: TestModels;
  let home: string;
  let ingress: IngressServer;

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-ingress-');
    home = await mkdtemp(path.join(os.tmpdir(), 'kiln-cli-ingress-home-'));
    ingress = await startIngressServer(models, home);
  }, 120_000);
  afterAll(async () => {
    ingress?.kill();
    await models?.remove();
    await rm(home, { recursive: true, force: true });
  });

  it('applies management calls in every process, and a replacement process replays them', async () => {
    const registered = await ingress.manage('POST', `/models?url=${path.basename(models.iris)}`);
    expect(registered.status).toBe(200);
    // Each process budgets its share of the cores: a model's default worker limit is that share.
    const [described] = (await (await ingress.manage('GET', '/models/iris')).json()) as {
      workerGroups: { maxWorkers: number }[];
    }[];
    expect(described!.workerGroups[0]!.maxWorkers).toBe(
      Math.max(1, Math.floor(os.availableParallelism() / 2)),
    );
    // Each connection goes to the next process: a process without the model would answer 404.
    expect(await statuses(`${ingress.inference}/predictions/iris`, IRIS, 12)).toEqual(
      Array(12).fill(200),
    );
    // One process's share of the metrics would show about half of them.
    expect(
      await metric(
        ingress.metrics,
        /^kiln_requests_total\{api="inference",route="\/predictions\/:model",model="iris",status="200"\} (\d+)$/m,
      ),
    ).toBe(12);

    expect(ingress.started).toHaveLength(2);
    process.kill(ingress.started[1]!, 'SIGKILL');
    await ingress.replaced(3);
    // It listens only once it has registered iris too.
    expect(await statuses(`${ingress.inference}/predictions/iris`, IRIS, 12)).toEqual(
      Array(12).fill(200),
    );

    expect((await ingress.manage('DELETE', '/models/iris')).status).toBe(200);
    expect(await statuses(`${ingress.inference}/predictions/iris`, IRIS, 6)).toEqual(
      Array(6).fill(404),
    );
    expect(await metric(ingress.metrics, /^kiln_model_ready\{model="tiny"\} (\d+)$/m)).toBe(1);
  }, 120_000);

  it.skipIf(!existsSync(PYTHON))(
    'undoes a registration that one process cannot load, and answers why',
    async () => {
      // A Python handler whose module fails to import in the second ingress process only.
      const dir = path.join(models.root, 'half');
      await refusingModel(dir, `os.environ.get("KILN_INGRESS_INDEX") == "1"`);
      const refused = await ingress.manage('POST', '/models?url=half');
      expect(refused.status).toBe(500);
      expect(JSON.stringify(await refused.json())).toMatch(/no room for this model here/);
      // Neither process lists or serves it.
      for (let i = 0; i < 4; i++)
        expect(
          await statusOf('GET', `${ingress.management}/models/half`, {
            headers: { authorization: `Bearer ${ingress.token}` },
          }),
        ).toBe(404);
      expect(await statuses(`${ingress.inference}/predictions/half`, '{}', 4)).toEqual(
        Array(4).fill(404),
      );

      // Loadable everywhere, the same registration succeeds.
      await refusingModel(dir, 'False');
      expect((await ingress.manage('POST', '/models?url=half')).status).toBe(200);
      expect(await statuses(`${ingress.inference}/predictions/half`, '{}', 4)).toEqual(
        Array(4).fill(204),
      );
      expect((await ingress.manage('DELETE', '/models/half')).status).toBe(200);
    },
    120_000,
  );

  it.skipIf(!existsSync(PYTHON))(
    'keeps a replacement that cannot load what the others serve from listening, and retries it',
    async () => {
      // Loads in both processes now; a replacement of the second fails while `refuse` exists.
      const dir = path.join(models.root, 'picky');
      await refusingModel(
        dir,
        `os.environ.get("KILN_INGRESS_INDEX") == "1" and os.path.exists(os.path.join(os.path.dirname(__file__), "refuse"))`,
      );
      expect((await ingress.manage('POST', '/models?url=picky')).status).toBe(200);
      await writeFile(path.join(dir, 'refuse'), '');
      const refusedReplay = waitFor(
        ingress.server,
        /could not replay a management call/,
        60_000,
        'stdout',
      );
      const before = ingress.started.length;
      process.kill(ingress.current.get(1)!, 'SIGKILL');
      await refusedReplay;
      // The first process alone takes the connections meanwhile: none is answered 404.
      expect(await statuses(`${ingress.inference}/predictions/picky`, '{}', 6)).toEqual(
        Array(6).fill(204),
      );
      await rm(path.join(dir, 'refuse'));
      expect(ingress.started.length).toBeGreaterThan(before);
      await until(
        async () => ingress.listens(1),
        60_000,
        'a replacement that loads picky and listens',
      );
      expect(await statuses(`${ingress.inference}/predictions/picky`, '{}', 6)).toEqual(
        Array(6).fill(204),
      );
      expect((await ingress.manage('DELETE', '/models/picky')).status).toBe(200);
    },
    120_000,
  );

  it('replaces a process signalled alone once it has drained', async () => {
    const before = ingress.started.length;
    process.kill(ingress.current.get(0)!, 'SIGTERM');
    await ingress.replaced(before + 1);
    const tiny = JSON.stringify({
      inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }],
    });
    expect(await statuses(`${ingress.inference}/v2/models/tiny/infer`, tiny, 6)).toEqual(
      Array(6).fill(200),
    );
  }, 120_000);

  it('drains and stops every process on SIGTERM', async () => {
    const stopped = waitFor(ingress.server, /stopped/, 60_000);
    const exited = new Promise<number | null>((resolve) => ingress.server.on('exit', resolve));
    ingress.server.kill('SIGTERM');
    await stopped;
    expect(await exited).toBe(0);
    for (const pid of ingress.started) expect(() => process.kill(pid, 0)).toThrow();
  }, 90_000);
});

describe.skipIf(!run || !existsSync(PYTHON))(
  'kiln serve --ingress-processes 2 whose every process is replaced',
  () => {
    let models: TestModels | undefined;
    let home: string | undefined;
    let ingress: IngressServer | undefined;
    afterAll(async () => {
      ingress?.kill();
      await models?.remove();
      if (home) await rm(home, { recursive: true, force: true });
    });

    it('still serves every other model, on the addresses it printed, when no process can load one any more', async () => {
      models = await makeTestModels('kiln-cli-ingress-all-');
      home = await mkdtemp(path.join(os.tmpdir(), 'kiln-cli-ingress-all-home-'));
      // Ephemeral ports: with every process gone at once the listeners close; the replacements
      // open them again on the same ports, so the addresses printed still lead to the server.
      ingress = await startIngressServer(models, home);
      const server = ingress;

      const dir = path.join(models.root, 'gone');
      await refusingModel(dir, 'os.path.exists(os.path.join(os.path.dirname(__file__), "refuse"))');
      expect((await server.manage('POST', '/models?url=gone')).status).toBe(200);
      await writeFile(path.join(dir, 'refuse'), '');
      // Both processes die at once; neither replacement can load `gone` again.
      const pids = [server.current.get(0)!, server.current.get(1)!];
      for (const pid of pids) process.kill(pid, 'SIGKILL');
      await until(
        async () =>
          !pids.includes(server.current.get(0)!) && !pids.includes(server.current.get(1)!),
        30_000,
        'two replacements',
      );
      await until(
        async () => server.listens(0) && server.listens(1),
        60_000,
        'both replacements listening',
      );
      const tiny = JSON.stringify({
        inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }],
      });
      expect(await statuses(`${server.inference}/v2/models/tiny/infer`, tiny, 6)).toEqual(
        Array(6).fill(200),
      );
      expect(await statuses(`${server.inference}/predictions/gone`, '{}', 4)).toEqual(
        Array(4).fill(404),
      );
      expect((await server.manage('GET', '/models/tiny')).status).toBe(200);
      expect(await metric(server.metrics, PROCESSES)).toBe(2);
      // A process replaced alone from now on shares those listeners too.
      const count = server.started.length;
      process.kill(server.current.get(1)!, 'SIGKILL');
      await server.replaced(count + 1);
      expect(await statuses(`${server.inference}/v2/models/tiny/infer`, tiny, 6)).toEqual(
        Array(6).fill(200),
      );
    }, 180_000);
  },
);

describe.skipIf(!run)('kiln serve --ingress-processes that cannot start', () => {
  it('exits with an error when the processes cannot listen', async () => {
    const taken = await takenPort();
    const home = await mkdtemp(path.join(os.tmpdir(), 'kiln-cli-ingress-fail-'));
    try {
      const result = await kiln(serveArgs(['--ingress-processes', '2'], taken.port), {
        env: { KILN_HOME: home },
        timeoutMs: 90_000,
      });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/exited while starting/);
      expect(result.stderr).not.toMatch(STACK_TRACE);
    } finally {
      await taken.close();
      await rm(home, { recursive: true, force: true });
    }
  }, 120_000);
});
