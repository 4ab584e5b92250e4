import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gptDecoderModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { buildImageModel, buildModelStore } from '../support/fixtures.js';
import type { Target } from './hostile-cases.js';
import { writePythonStormModels } from './python-storm.js';
import { type ServerProcess, startServerProcess } from './server-process.js';

export const STORM_MAX_REQUEST_SIZE = 1024 * 1024;
export const STORM_MAX_PROMPT_BYTES = 256 * 1024;
/** Short, so that the drain at the end of a storm is over in seconds. */
export const STORM_SHUTDOWN_TIMEOUT_MS = 3000;
export const STORM_GENERATIVE_MODEL = 'gpt';

/**
 * A model store (tensor, JSON, image and text-generation models, and Python-mode handlers
 * when Python is there) and a `kiln serve` process over it, with every listener on: HTTP
 * inference, management, metrics and v2 gRPC.
 */
export async function startStormServer(options: { ingressProcesses?: number } = {}): Promise<{
  server: ServerProcess;
  target: Target;
  /** Whether the Python-mode models are served. */
  python: boolean;
  cleanup(): Promise<void>;
}> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-storm-'));
  const store = await buildModelStore(path.join(dir, 'store'));
  const image = await buildImageModel(path.join(dir, 'store', 'image'));
  const gpt = await gptDecoderModel(path.join(dir, 'store', STORM_GENERATIVE_MODEL), {
    layers: 2,
    hidden: 32,
    heads: 2,
    maxLen: 256,
    properties: { 'option.max_rolling_batch_size': '8' },
  });
  const { run: python } = await checkEngine('Python', () => {
    try {
      execFileSync('/usr/bin/python3', ['-c', 'import numpy'], { stdio: 'ignore' });
      return Promise.resolve(null);
    } catch {
      return Promise.resolve('/usr/bin/python3 cannot import numpy: the storm skips Python mode');
    }
  });
  const server = await startServerProcess(
    dir,
    [
      `addmul=${store.addMul}`,
      `iris=${store.iris}`,
      `image=${image}`,
      `${STORM_GENERATIVE_MODEL}=${gpt.dir}`,
      ...(python ? writePythonStormModels(path.join(dir, 'store')) : []),
    ],
    {
      model_store: path.join(dir, 'store'),
      max_request_size: String(STORM_MAX_REQUEST_SIZE),
      max_prompt_bytes: String(STORM_MAX_PROMPT_BYTES),
      grpc_address: '127.0.0.1:0',
      // Short client timeouts keep stalled hostile bodies from dominating the run time.
      client_body_timeout: '1000',
      client_header_timeout: '2000',
      request_timeout: '8000',
      shutdown_timeout: String(STORM_SHUTDOWN_TIMEOUT_MS),
      // A fixed worker count: memory then measures the requests, not the pool scaling.
      min_workers: '1',
      max_workers: '1',
      ...(options.ingressProcesses ? { ingress_processes: String(options.ingressProcesses) } : {}),
    },
  );
  return {
    server,
    python,
    target: {
      key: server.key,
      tensorModel: 'addmul',
      jsonModel: 'iris',
      imageModel: 'image',
      maxRequestSize: STORM_MAX_REQUEST_SIZE,
    },
    cleanup: async () => {
      await server.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
