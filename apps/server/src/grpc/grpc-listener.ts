import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { ServerContext } from '../routes/server-context.js';
import { widenFlowControlWindows } from './flow-control.js';
import { parseGrpcAddress } from './grpc-address.js';
import { inferenceService } from './inference-service.js';
import { bytesInServiceDefinition } from './proto.js';

export interface GrpcListener {
  /** `host:port` it is bound to. */
  readonly address: string;
  /** Waits for calls in flight (up to the timeout), then closes every connection. */
  close(timeoutMs: number): Promise<void>;
}

/**
 * Serves `inference.GRPCInferenceService` on its own port (plaintext HTTP/2, like the HTTP
 * listeners: TLS belongs to a proxy or mesh). Messages are bounded by max_request_size.
 */
export async function listenGrpc(server: ServerContext, address: string): Promise<GrpcListener> {
  const { host, port } = parseGrpcAddress(address);
  const grpc = new Server({
    'grpc.max_receive_message_length': server.config.maxRequestSize,
    'grpc.max_send_message_length': -1,
  });
  widenFlowControlWindows(grpc);
  const { definition, decoders } = bytesInServiceDefinition();
  grpc.addService(definition, inferenceService(server, decoders));
  const target = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  const bound = await new Promise<number>((resolve, reject) =>
    grpc.bindAsync(target, ServerCredentials.createInsecure(), (error, boundPort) =>
      error ? reject(error) : resolve(boundPort),
    ),
  );
  return {
    address: host.includes(':') ? `[${host}]:${bound}` : `${host}:${bound}`,
    close: (timeoutMs) =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          grpc.forceShutdown();
          resolve();
        }, timeoutMs);
        force.unref();
        grpc.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
