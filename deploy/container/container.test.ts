import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type Client, Metadata, type ServiceError, credentials } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIrisDemo, slowModel } from '@kiln/model-tools';
import { loadInferencePackage } from '@kiln/server';
import { missingTools, podman, podmanLogs } from './podman.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const README = path.join(HERE, '..', '..', 'README.md');
const IMAGE = process.env.KILN_IMAGE ?? 'localhost/kiln:test';
const NAME = `kiln-container-test-${process.pid}`;
// Host networking (what works here): the test binds loopback ports of its own.
const PORT = 18880;
const ports = { http: PORT, grpc: PORT + 1, metrics: PORT + 2, management: PORT + 3 };

const missing = missingTools();
if (missing) console.warn(`skipping the container test: ${missing}`);

let root: string;
let logs = '';

beforeAll(async () => {
  if (missing) return;
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-container-'));
  const started = performance.now();
  const size = (
    await promisify(execFile)('bash', [path.join(HERE, 'build-image.sh')], {
      env: { ...process.env, KILN_IMAGE: IMAGE },
      timeout: 1_100_000,
      maxBuffer: 64 * 1024 * 1024,
    })
  ).stdout.trim();
  console.log(
    `image ${IMAGE}: ${(Number(size) / 1e6).toFixed(0)} MB, built in ${((performance.now() - started) / 1000).toFixed(0)} s`,
  );
  // Models as KServe's storage initializer leaves them: a folder mounted at /mnt/models.
  const models = path.join(root, 'models');
  await buildIrisDemo(path.join(models, 'iris'));
  await slowModel(path.join(models, 'slow'), 1500);
  fs.appendFileSync(
    path.join(models, 'slow', 'serving.properties'),
    'batch_size=1\nminWorkers=1\nmaxWorkers=1\n',
  );
  fs.chmodSync(models, 0o755);
  await podman([
    'run',
    '-d',
    '--name',
    NAME,
    '--network=host',
    '-v',
    `${models}:/mnt/models:ro`,
    '-e',
    `KILN_INFERENCE_ADDRESS=http://127.0.0.1:${ports.http}`,
    '-e',
    `KILN_GRPC_ADDRESS=127.0.0.1:${ports.grpc}`,
    '-e',
    `KILN_METRICS_ADDRESS=http://127.0.0.1:${ports.metrics}`,
    '-e',
    `KILN_MANAGEMENT_ADDRESS=http://127.0.0.1:${ports.management}`,
    IMAGE,
    '--model_dir=/mnt/models/iris',
    '--model_name=iris',
    '-m',
    'slow=/mnt/models/slow',
  ]);
  for (let i = 0; i < 240; i++) {
    const ready = await fetch(`http://127.0.0.1:${ports.http}/v2/health/ready`).catch(
      () => undefined,
    );
    if (ready?.status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`container not ready: ${await podmanLogs(NAME).catch(String)}`);
}, 1_200_000);

afterAll(async () => {
  if (missing) return;
  await podman(['rm', '-f', NAME]).catch(() => undefined);
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

/** The curl calls of the README's container section, run against this container's ports. */
function readmeCurls(): string[] {
  const text = fs.readFileSync(README, 'utf8');
  const section = text.slice(text.indexOf('### Container image'));
  const block =
    /```sh\n([\s\S]*?)```/.exec(section.slice(section.indexOf('curl') - 200))?.[1] ?? '';
  return block
    .split('\n')
    .filter((line) => line.startsWith('curl '))
    .map((line) =>
      line
        .replace(/localhost:8080/g, `127.0.0.1:${ports.http}`)
        .replace(/localhost:8082/g, `127.0.0.1:${ports.metrics}`),
    );
}

describe.skipIf(missing !== undefined)('the Kiln container image', () => {
  it("answers the README's curl calls", async () => {
    const curls = readmeCurls();
    expect(curls.length).toBeGreaterThanOrEqual(3);
    for (const command of curls) {
      const { stdout } = await promisify(execFile)('bash', [
        '-c',
        `${command} --fail --silent --show-error`,
      ]);
      expect(stdout.length, command).toBeGreaterThan(0);
    }
  });

  it('serves a v2 HTTP inference and a v2 gRPC inference with the same answer', async () => {
    const features = [5.1, 3.5, 1.4, 0.2];
    const http = await fetch(`http://127.0.0.1:${ports.http}/v2/models/iris/infer`, {
      method: 'POST',
      body: JSON.stringify({
        inputs: [{ name: 'features', shape: [1, 4], datatype: 'FP32', data: features }],
      }),
    });
    expect(http.status).toBe(200);
    const httpAnswer = (await http.json()) as { outputs: { data: number[] }[] };
    const Service = loadInferencePackage().GRPCInferenceService as unknown as new (
      address: string,
      creds: ReturnType<typeof credentials.createInsecure>,
    ) => Client & {
      ModelInfer(
        request: unknown,
        metadata: Metadata,
        callback: (e: ServiceError | null, r: { raw_output_contents: Buffer[] }) => void,
      ): void;
    };
    const client = new Service(`127.0.0.1:${ports.grpc}`, credentials.createInsecure());
    const grpc = await new Promise<{ raw_output_contents: Buffer[] }>((resolve, reject) =>
      client.ModelInfer(
        {
          model_name: 'iris',
          inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 4] }],
          raw_input_contents: [Buffer.from(new Float32Array(features).buffer)],
        },
        new Metadata(),
        (error, response) => (error ? reject(error) : resolve(response)),
      ),
    );
    client.close();
    const raw = grpc.raw_output_contents[0]!;
    const probabilities = Array.from(new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4));
    expect(probabilities).toEqual(httpAnswer.outputs[0]!.data.map((v) => Math.fround(v)));
    expect(probabilities[0]).toBeGreaterThan(0.9);
  });

  it('runs as a non-root user', async () => {
    const user = await podman(['exec', NAME, 'id', '-u']);
    expect(Number(user.trim())).toBe(10001);
  });

  it('drains on SIGTERM: the request in flight is answered, then the container exits 0', async () => {
    const body = JSON.stringify({
      inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }],
    });
    const inFlight = fetch(`http://127.0.0.1:${ports.http}/v2/models/slow/infer`, {
      method: 'POST',
      body,
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stopping = podman(['stop', '--time', '30', NAME], 60_000);
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    await stopping;
    const state = JSON.parse(await podman(['inspect', NAME, '--format', '{{json .State}}'])) as {
      ExitCode: number;
    };
    logs = await podmanLogs(NAME);
    expect(logs).toMatch(/SIGTERM: draining in-flight requests/);
    expect(logs).toMatch(/stopped/);
    expect(state.ExitCode).toBe(0);
  });
});
