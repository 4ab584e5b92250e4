import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { request } from './hostile-cases.js';
import { type PhaseTally, count, inLanes, newTally } from './phase-tally.js';
import { isJson, send } from './storm.js';

/**
 * `batched`: batched like any model (adaptive batching), and a request marked `exit` kills
 * its worker process — the requests batched with it are innocent and must be answered.
 */
const BATCHED_HANDLER = `
import os
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    out = Output()
    for i, item in enumerate(inputs.get_batches()):
        x = item.get_as_json()
        if x.get("kind") == "exit":
            os._exit(1)
        out.add_as_json({"echo": x.get("value")}, batch_index=i)
    return out
`;

/** `faults`: one request a call, and a handler that fails in every way a handler can. */
const FAULTS_HANDLER = `
import os, time
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    x = inputs.get_as_json()
    kind = x.get("kind") if isinstance(x, dict) else None
    if kind == "raise":
        raise RuntimeError("the handler refused")
    if kind == "hang":
        time.sleep(30)
    if kind == "exit":
        os._exit(1)
    if kind == "big":
        return Output().add(b"x" * (int(x.get("mib", 1)) << 20))
    if kind == "none":
        return None
    return Output().add_as_json({"echo": x.get("value") if isinstance(x, dict) else None})
`;

/** Writes the two Python models of the storm into `store`; returns their `-m` arguments. */
export function writePythonStormModels(store: string): string[] {
  const models: [string, string, string][] = [
    ['batched', BATCHED_HANDLER, ''],
    ['faults', FAULTS_HANDLER, 'batch_size=1\noption.predict_timeout=1\n'],
  ];
  return models.map(([name, source, properties]) => {
    const dir = path.join(store, name);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'model.py'), source);
    fs.writeFileSync(
      path.join(dir, 'serving.properties'),
      `option.pythonExecutable=/usr/bin/python3\n${properties}`,
    );
    return `${name}::Python=${dir}`;
  });
}

interface PythonCase {
  readonly kind: string;
  readonly bytes: Buffer;
  /** An innocent request: it must get 200 with its own value echoed. */
  readonly echo?: number;
}

const post = (model: string, body: Buffer, contentType = 'application/json') =>
  request({
    method: 'POST',
    path: `/predictions/${model}`,
    headers: { 'content-type': contentType },
    body,
  });

const jsonPost = (model: string, value: unknown) => post(model, Buffer.from(JSON.stringify(value)));

function pythonCases(): fc.Arbitrary<PythonCase> {
  const innocent = fc.integer({ min: 0, max: 1e6 }).map((value) => ({
    kind: 'innocent beside a killer',
    bytes: jsonPost('batched', { kind: 'ok', value }),
    echo: value,
  }));
  const killer = fc.constant({
    kind: 'killer in a batch',
    bytes: jsonPost('batched', { kind: 'exit' }),
  });
  const fault = fc.constantFrom('raise', 'raise', 'exit', 'big', 'none', 'hang').map((kind) => ({
    kind: `handler ${kind}`,
    bytes: jsonPost('faults', { kind, mib: 8 }),
  }));
  const garbage = fc
    .record({
      body: fc.uint8Array({ maxLength: 256 }).map((a) => Buffer.from(a)),
      type: fc.constantFrom('application/json', 'tensor/npz', 'text/plain', 'image/png', ''),
    })
    .map(({ body, type }) => ({ kind: 'handler garbage body', bytes: post('faults', body, type) }));
  return fc.oneof(
    { arbitrary: innocent, weight: 12 },
    { arbitrary: killer, weight: 1 },
    { arbitrary: fault, weight: 3 },
    { arbitrary: garbage, weight: 3 },
  );
}

/**
 * Python-mode handlers that raise, hang, exit, answer too much or nothing, and bodies they
 * cannot read — while innocent requests are batched beside a request that kills its worker.
 * Faults may be answered with any error status (a handler's failure is the client's answer),
 * as JSON; an innocent request must get its own answer.
 */
export async function runPythonStorm(
  base: string,
  options: {
    requests: number;
    concurrency: number;
    seed: number;
    hangMs: number;
    alive(): boolean;
  },
): Promise<PhaseTally> {
  const tally = newTally();
  const cases = fc.sample(pythonCases(), { numRuns: options.requests, seed: options.seed });
  let next = 0;
  await inLanes(options.concurrency, async () => {
    while (next < cases.length && options.alive()) {
      const c = cases[next++]!;
      const answer = await send(base, c.bytes, options.hangMs);
      tally.requests++;
      const seen = {
        kind: c.kind,
        status: answer.status,
        request: c.bytes.subarray(0, 300).toString('latin1'),
        answer: answer.body,
      };
      if (answer.refused || !options.alive()) count(tally, 'crashes', seen);
      else if (answer.ms >= options.hangMs) count(tally, 'hangs', seen);
      else if (c.echo !== undefined) {
        if (answer.status !== 200 || answer.body.replace(/\s/g, '') !== `{"echo":${c.echo}}`)
          count(tally, 'innocentFailures', seen);
      } else if (answer.status === 0 || (answer.status >= 400 && !isJson(answer.body)))
        count(tally, 'nonJson', seen);
    }
  });
  return tally;
}
