import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildModelStore } from '../support/fixtures.js';
import { v2GrpcClient } from '../support/grpc-client.js';
import { sleep, tempDir } from '../support/server-harness.js';

// SIGTERM under keep-alive clients that never stop sending (issue #34): every answer from the
// drain on closes its connection, a refusal is a 503 with Retry-After and a JSON body, a model
// being drained is never a 404, accepted requests are answered, and the process is gone by
// shutdown_timeout whatever the clients do.

const BIN = fileURLToPath(new URL('../../apps/cli/bin/kiln.mjs', import.meta.url));
const SHUTDOWN_TIMEOUT_MS = 3000;
/** What a loaded two-core machine may add to shutdown_timeout before the process is gone. */
const EXIT_MARGIN_MS = 4000;
const CLIENTS = 4;
const SLOW_REQUESTS = 2;
const IRIS = '[5.1, 3.5, 1.4, 0.2]';
const PYTHON = '/usr/bin/python3';
/**
 * A model that takes its time without taking the CPU (a loaded machine would stretch work):
 * each request sleeps half a second in its Python worker.
 */
const NAP = `
import time
from djl_python import Output

def handle(inputs):
    if inputs.is_empty():
        return None
    time.sleep(0.5)
    return Output().add_as_json({"slept": True})
`;

let root: string;
let models: string[];

beforeAll(async () => {
  root = tempDir('sigterm-drain');
  const store = await buildModelStore(path.join(root, 'store'));
  // One worker, one request at a time: the slow requests sent before SIGTERM are still
  // running or queued when it arrives.
  const slow = path.join(root, 'slow');
  fs.mkdirSync(slow);
  fs.writeFileSync(path.join(slow, 'model.py'), NAP);
  fs.writeFileSync(
    path.join(slow, 'serving.properties'),
    `option.pythonExecutable=${PYTHON}\nminWorkers=1\nmaxWorkers=1\nbatch_size=1\n`,
  );
  models = [`iris=${store.iris}`, `slow::Python=${slow}`];
});

afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

interface Answer {
  readonly status: number;
  readonly connection: string | undefined;
  readonly retryAfter: string | undefined;
  readonly body: string;
}

/** One POST; a connection error (reset, refused) resolves as undefined. */
function post(
  url: string,
  body: string,
  agent: http.Agent | false,
  contentType = 'application/json',
): Promise<Answer | undefined> {
  return new Promise((resolve) => {
    const request = http.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': contentType } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            connection: response.headers.connection,
            retryAfter: response.headers['retry-after'],
            body: Buffer.concat(chunks).toString(),
          }),
        );
        response.on('error', () => resolve(undefined));
      },
    );
    request.on('error', () => resolve(undefined));
    request.end(body);
  });
}

interface Served {
  readonly child: ChildProcess;
  readonly inference: string;
  readonly metrics: string;
  /** The gRPC listener's host:port, when config.properties names one. */
  readonly grpc: string | undefined;
  readonly exited: Promise<number | null>;
  /** What the server wrote (shown when it did not exit cleanly). */
  output(): string;
}

async function serve(dir: string, properties: Record<string, string>): Promise<Served> {
  const configFile = path.join(dir, 'config.properties');
  fs.writeFileSync(
    configFile,
    Object.entries({
      inference_address: 'http://127.0.0.1:0',
      management_address: 'http://127.0.0.1:0',
      metrics_address: 'http://127.0.0.1:0',
      key_file: path.join(dir, 'key_file.json'),
      shutdown_timeout: String(SHUTDOWN_TIMEOUT_MS),
      ...properties,
    })
      .map(([key, value]) => `${key}=${value}`)
      .join('\n'),
  );
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '-f', configFile, ...models.flatMap((m) => ['-m', m])],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  // stdout carries the JSON log: read, so that a full pipe never stalls the server.
  let stdout = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let gone = false;
  void exited.then(() => (gone = true));
  for (let i = 0; i < 1200; i++) {
    if (gone) throw new Error(`kiln serve exited:\n${stderr}`);
    const settled = (stderr.match(/ (READY|FAILED)/g) ?? []).length;
    if (settled >= models.length && /metrics\s+http/.test(stderr)) break;
    await sleep(50);
  }
  expect(stderr).not.toMatch(/FAILED/);
  const url = (name: string) => new RegExp(`${name}\\s+(http://\\S+)`).exec(stderr)![1]!;
  const served = {
    child,
    inference: url('inference'),
    metrics: url('metrics').replace(/\/metrics$/, ''),
    grpc: /grpc\s+(\S+)/.exec(stderr)?.[1],
    exited,
    // The log's last lines, without the access log's.
    output: () =>
      `${stderr}\n${stdout
        .split('\n')
        .filter((line) => !/"api":/.test(line))
        .slice(-40)
        .join('\n')}`,
  };
  // The first ingress process prints READY; the summed metrics say when every one serves.
  const processes = Number(properties.ingress_processes ?? 1);
  await until(async () => {
    const text = await metricsText(served.metrics);
    const ready = text.match(/^kiln_model_ready\{[^}]*\} 1$/gm)?.length ?? 0;
    return (
      ready >= models.length &&
      (processes === 1 || new RegExp(`^kiln_ingress_processes ${processes}$`, 'm').test(text))
    );
  }, 'every process serves every model');
  return served;
}

async function metricsText(base: string): Promise<string> {
  return (await fetch(`${base}/metrics`)).text();
}

/** The slow model's requests running or queued, summed over every process. */
async function slowInModel(base: string): Promise<number> {
  const text = await metricsText(base);
  const value = (line: RegExp) => Number(line.exec(text)?.[1] ?? 0);
  return (
    value(/^kiln_workers\{model="slow",state="busy"\} (\d+)$/m) +
    value(/^kiln_queue_depth\{model="slow"\} (\d+)$/m)
  );
}

/** The process ids a process started (its ingress processes), from /proc. */
function childrenOf(pid: number): number[] {
  return fs
    .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .split(' ')
    .filter(Boolean)
    .map(Number);
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await check()) return;
    await sleep(50);
  }
  throw new Error(`never happened: ${what}`);
}

/** A keep-alive client sending one request after another on its connection until told to stop. */
function keepSending(inference: string, sending: { on: boolean }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const answers: Answer[] = [];
  let errors = 0;
  const done = (async () => {
    while (sending.on) {
      const answer = await post(`${inference}/predictions/iris`, IRIS, agent);
      if (answer) answers.push(answer);
      else {
        errors++;
        // Refused: the listener is closed. Try again soon, as a client that insists would.
        await sleep(5);
      }
    }
    agent.destroy();
  })();
  return { answers, errors: () => errors, done };
}

/** A gRPC client asking after a model, call after call, until told to stop: its status codes. */
function keepCalling(address: string, sending: { on: boolean }) {
  const client = v2GrpcClient(address);
  const codes: number[] = [];
  const done = (async () => {
    while (sending.on) {
      try {
        await client.call('ModelReady', { name: 'iris' }, { deadlineMs: 2000 });
        codes.push(0);
      } catch (error) {
        codes.push((error as { code: number }).code);
        await sleep(5);
      }
    }
    client.close();
  })();
  return { codes, done };
}

/**
 * A prediction whose head is sent now and its body when `finish` is called: a request the
 * server accepted, still arriving when the drain begins. Resolves with the raw answer.
 */
function halfSent(inference: string) {
  const { hostname, port } = new URL(inference);
  const socket = net.connect(Number(port), hostname);
  socket.write(
    `POST /predictions/iris HTTP/1.1\r\nHost: ${hostname}:${port}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(IRIS)}\r\n\r\n`,
  );
  let raw = '';
  socket.on('data', (d: Buffer) => (raw += d.toString()));
  const answered = new Promise<string>((resolve) => {
    socket.on('close', () => resolve(raw));
    socket.on('error', () => undefined);
  });
  return {
    finish: () => {
      socket.write(IRIS);
      return answered;
    },
  };
}

/** SIGTERM under keep-alive clients; what each saw, the slow requests' answers, and the exit. */
async function sigtermUnderLoad(properties: Record<string, string>) {
  const server = await serve(tempDir('sigterm-drain-run'), properties);
  try {
    const sending = { on: true };
    const clients = Array.from({ length: CLIENTS }, () => keepSending(server.inference, sending));
    const grpc = server.grpc ? keepCalling(server.grpc, sending) : undefined;
    await until(
      async () => clients.every((c) => c.answers.length >= 3),
      'every client is answered',
    );
    const arriving = halfSent(server.inference);
    // Accepted before the signal: running or queued in the slow model.
    const slow = Array.from({ length: SLOW_REQUESTS }, () =>
      post(`${server.inference}/predictions/slow`, '{}', false),
    );
    await until(
      async () => (await slowInModel(server.metrics)) >= SLOW_REQUESTS,
      'the slow requests are accepted',
    );
    const before = clients.map((c) => c.answers.length);
    const processes = childrenOf(server.child.pid!);
    const signalled = performance.now();
    server.child.kill('SIGTERM');
    // The rest of the arriving request's body once the server refuses new requests.
    await until(
      async () => clients.some((c, i) => c.answers.slice(before[i]).some((a) => a.status === 503)),
      'the server drains',
    );
    const arrived = arriving.finish();
    // Waited for a while past the limit, so that a server that never exits fails the checks
    // below rather than the test's own timeout.
    const code = await Promise.race([
      server.exited,
      sleep(2 * (SHUTDOWN_TIMEOUT_MS + EXIT_MARGIN_MS)).then(() => 'still running'),
    ]);
    if (code !== 0) console.error(server.output());
    const exitMs = performance.now() - signalled;
    sending.on = false;
    await Promise.all([...clients.map((c) => c.done), grpc?.done]);
    return {
      code,
      exitMs,
      // The ingress processes (and the models' worker processes, if any) left with it.
      leftBehind: processes.filter(isRunning),
      slowAnswers: await Promise.all(slow),
      arrived: await arrived,
      // Answers on each client from just before the signal on.
      clients: clients.map((c, i) => c.answers.slice(before[i])),
      all: clients.flatMap((c) => c.answers),
      grpcCodes: grpc?.codes ?? [],
    };
  } finally {
    server.child.kill('SIGKILL');
  }
}

function expectAnHonestDrain(result: Awaited<ReturnType<typeof sigtermUnderLoad>>): void {
  // Gone by shutdown_timeout even though the clients never stopped sending.
  expect(result.code).toBe(0);
  expect(result.exitMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS + EXIT_MARGIN_MS);
  expect(result.leftBehind).toEqual([]);

  // Accepted before the signal, answered during the drain: served, and the connection closes.
  for (const answer of result.slowAnswers) {
    expect(answer).toMatchObject({ status: 200, connection: 'close' });
  }

  // Its head came before the drain, its body during it: served too, never a 404.
  expect(result.arrived).toMatch(/^HTTP\/1\.1 200 /);
  expect(result.arrived).toMatch(/\r\nConnection: close\r\n/i);

  // Never a 404 for a model being drained: served, or refused as unavailable.
  for (const answer of result.all) expect([200, 503]).toContain(answer.status);
  for (const answer of result.all.filter((a) => a.status === 503)) {
    expect(answer.connection).toBe('close');
    expect(answer.retryAfter).toMatch(/^\d+$/);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 503, message: expect.any(String) });
  }

  for (const answers of result.clients) {
    // Each client met the drain on its keep-alive connection…
    const first = answers.findIndex((a) => a.connection === 'close');
    expect(first).toBeGreaterThanOrEqual(0);
    // …and from then on every answer closed its connection (the drain never ends early).
    expect(answers.slice(first).every((a) => a.connection === 'close')).toBe(true);
  }
  // The clients were refused during the drain, on connections that then closed.
  expect(result.all.some((a) => a.status === 503)).toBe(true);
  // gRPC calls: answered, or unavailable once the server goes (never "model not found").
  expect(result.grpcCodes.filter((code) => code !== 0 && code !== 14)).toEqual([]);
}

describe('kiln serve: SIGTERM under keep-alive clients that keep sending', () => {
  it('one server process: closes connections, refuses with 503, answers what it accepted, exits by shutdown_timeout', async () => {
    // A gRPC client calling without pause does not hold the process past shutdown_timeout either.
    const result = await sigtermUnderLoad({ grpc_address: '127.0.0.1:0' });
    expect(result.grpcCodes.length).toBeGreaterThan(0);
    expectAnHonestDrain(result);
  }, 120_000);

  it('ingress processes: the primary and each of its processes drain the same way and exit', async () => {
    expectAnHonestDrain(await sigtermUnderLoad({ ingress_processes: '2' }));
  }, 120_000);
});
