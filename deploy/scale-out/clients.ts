import { type Client, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { loadInferencePackage } from '@kiln/server';

/** What a load pass saw: every request ends in exactly one of these. */
export interface Outcome {
  /** Right answer at the first attempt. */
  ok: number;
  /** Right answer after the client retried. */
  okAfterRetry: number;
  /** An answer, but not the expected one: would be a silent loss. */
  wrong: number;
  /** No answer after every retry: reported to the caller as an error. */
  failed: number;
  errors: string[];
}

export const emptyOutcome = (): Outcome => ({
  ok: 0,
  okAfterRetry: 0,
  wrong: 0,
  failed: 0,
  errors: [],
});

const RETRYABLE_STATUS = new Set([502, 503, 504]);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * HTTP v2 binary inference with the retry a client library applies to an idempotent call:
 * on a connection error or 502/503/504, up to 4 attempts with exponential back-off.
 */
export async function httpInfer(
  url: string,
  body: Buffer,
  headerLength: number,
  expected: Buffer,
  outcome: Outcome,
): Promise<void> {
  for (let attempt = 1; attempt <= 4; attempt++) {
    try {
      const response = await fetch(url, {
        method: 'POST',
        body,
        headers: { 'inference-header-content-length': String(headerLength) },
      });
      const answer = Buffer.from(await response.arrayBuffer());
      if (RETRYABLE_STATUS.has(response.status) && attempt < 4) {
        await sleep(50 * 2 ** attempt);
        continue;
      }
      if (response.status !== 200) {
        outcome.failed++;
        outcome.errors.push(`HTTP ${response.status}`);
        return;
      }
      const jsonLength = Number(response.headers.get('inference-header-content-length'));
      if (!answer.subarray(jsonLength).equals(expected)) outcome.wrong++;
      else if (attempt === 1) outcome.ok++;
      else outcome.okAfterRetry++;
      return;
    } catch (error) {
      if (attempt === 4) {
        outcome.failed++;
        outcome.errors.push(String(error));
        return;
      }
      await sleep(50 * 2 ** attempt);
    }
  }
}

/** grpc-js's own retry policy (gRFC A6): UNAVAILABLE calls are retried by the library. */
const RETRY_SERVICE_CONFIG = JSON.stringify({
  methodConfig: [
    {
      name: [{ service: 'inference.GRPCInferenceService' }],
      retryPolicy: {
        maxAttempts: 4,
        initialBackoff: '0.1s',
        maxBackoff: '1s',
        backoffMultiplier: 2,
        retryableStatusCodes: ['UNAVAILABLE'],
      },
    },
  ],
});

export interface GrpcInfer {
  infer(request: unknown, expected: Buffer, outcome: Outcome): Promise<void>;
  close(): void;
}

export function grpcInferClient(address: string): GrpcInfer {
  const Service = loadInferencePackage().GRPCInferenceService as unknown as new (
    address: string,
    creds: ReturnType<typeof credentials.createInsecure>,
    options: Record<string, unknown>,
  ) => Client & {
    ModelInfer(
      request: unknown,
      metadata: Metadata,
      callback: (error: ServiceError | null, response: { raw_output_contents: Buffer[] }) => void,
    ): void;
  };
  const client = new Service(address, credentials.createInsecure(), {
    'grpc.service_config': RETRY_SERVICE_CONFIG,
    'grpc.max_receive_message_length': -1,
    // The library buffers the request for retries; room for a few ResNet inputs in flight.
    'grpc.per_rpc_retry_buffer_size': 8 * 1024 * 1024,
    'grpc.retry_buffer_size': 64 * 1024 * 1024,
  });
  return {
    infer: (request, expected, outcome) =>
      new Promise((resolve) =>
        client.ModelInfer(request, new Metadata(), (error, response) => {
          if (error) {
            outcome.failed++;
            outcome.errors.push(`${error.code} ${error.details}`);
          } else if (!response.raw_output_contents[0]?.equals(expected)) outcome.wrong++;
          else outcome.ok++;
          resolve();
        }),
      ),
    close: () => client.close(),
  };
}
