import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildImageModel, buildModelStore } from '../support/fixtures.js';
import type { Target } from './hostile-cases.js';
import { type ServerProcess, startServerProcess } from './server-process.js';

export const STORM_MAX_REQUEST_SIZE = 1024 * 1024;

/** A model store (tensor, JSON and image models) and a `kiln serve` process over it. */
export async function startStormServer(options: { ingressProcesses?: number } = {}): Promise<{
  server: ServerProcess;
  target: Target;
  cleanup(): Promise<void>;
}> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-storm-'));
  const store = await buildModelStore(path.join(dir, 'store'));
  const image = await buildImageModel(path.join(dir, 'store', 'image'));
  const server = await startServerProcess(
    dir,
    [`addmul=${store.addMul}`, `iris=${store.iris}`, `image=${image}`],
    {
      model_store: path.join(dir, 'store'),
      max_request_size: String(STORM_MAX_REQUEST_SIZE),
      // Short client timeouts keep stalled hostile bodies from dominating the run time.
      client_body_timeout: '1000',
      client_header_timeout: '2000',
      request_timeout: '8000',
      // A fixed worker count: memory then measures the requests, not the pool scaling.
      min_workers: '1',
      max_workers: '1',
      ...(options.ingressProcesses ? { ingress_processes: String(options.ingressProcesses) } : {}),
    },
  );
  return {
    server,
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
