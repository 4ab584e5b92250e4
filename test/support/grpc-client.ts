import { type Client, type ServiceError, credentials, Metadata } from '@grpc/grpc-js';
import { loadInferencePackage } from '@kiln/server';

type Constructor = new (
  address: string,
  creds: ReturnType<typeof credentials.createInsecure>,
) => Client;

/** A grpc-js v2 client whose unary methods return promises. */
export interface V2GrpcClient {
  call<T = Record<string, unknown>>(
    method: string,
    request: unknown,
    options?: { deadlineMs?: number; signal?: AbortSignal },
  ): Promise<T>;
  close(): void;
}

export function v2GrpcClient(address: string): V2GrpcClient {
  const Service = loadInferencePackage().GRPCInferenceService as unknown as Constructor;
  const client = new Service(address, credentials.createInsecure()) as Client &
    Record<string, (...args: unknown[]) => { cancel(): void }>;
  return {
    call: (method, request, options = {}) =>
      new Promise((resolve, reject) => {
        const callOptions =
          options.deadlineMs === undefined ? {} : { deadline: Date.now() + options.deadlineMs };
        const call = client[method]!.call(
          client,
          request,
          new Metadata(),
          callOptions,
          (error: ServiceError | null, response: unknown) =>
            error ? reject(error) : resolve(response as never),
        );
        options.signal?.addEventListener('abort', () => call.cancel(), { once: true });
      }),
    close: () => client.close(),
  };
}

/** The gRPC status code a failed call ended with. */
export async function grpcCodeOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
  } catch (error) {
    return (error as ServiceError).code;
  }
  throw new Error('call succeeded, expected a gRPC error');
}
