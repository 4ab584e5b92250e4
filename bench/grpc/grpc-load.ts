import { type Client, credentials } from '@grpc/grpc-js';
import { loadInferencePackage } from '@kiln/server';

export interface GrpcLoadOptions {
  readonly address: string;
  readonly request: unknown;
  readonly concurrency: number;
  readonly durationMs: number;
  /** Checked on every answer; throwing counts an error. */
  readonly check?: (response: unknown) => void;
}

export interface GrpcLoadResult {
  readonly requests: number;
  readonly errors: number;
  readonly throughput: number;
}

type Infer = (request: unknown, callback: (error: Error | null, response: unknown) => void) => void;

/**
 * Closed-loop ModelInfer load: `concurrency` callers on one channel (HTTP/2 multiplexes them,
 * as a gRPC client library does by default), each sending its next call when answered.
 */
export async function runGrpcLoad(options: GrpcLoadOptions): Promise<GrpcLoadResult> {
  const Service = loadInferencePackage().GRPCInferenceService as unknown as new (
    address: string,
    creds: ReturnType<typeof credentials.createInsecure>,
    channelOptions: Record<string, number>,
  ) => Client & { ModelInfer: Infer };
  const client = new Service(options.address, credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
  });
  const infer = (request: unknown) =>
    new Promise<unknown>((resolve, reject) =>
      client.ModelInfer(request, (error, response) => (error ? reject(error) : resolve(response))),
    );
  let requests = 0;
  let errors = 0;
  const started = performance.now();
  const deadline = started + options.durationMs;
  try {
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (performance.now() < deadline) {
          requests++;
          try {
            const response = await infer(options.request);
            options.check?.(response);
          } catch {
            errors++;
          }
        }
      }),
    );
  } finally {
    client.close();
  }
  const seconds = (performance.now() - started) / 1000;
  return { requests, errors, throughput: (requests - errors) / seconds };
}
