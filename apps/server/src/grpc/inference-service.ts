import {
  Metadata,
  type ServerUnaryCall,
  type UntypedServiceImplementation,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { KilnError, KilnErrorCode, grpcInferTarget } from '@kiln/core';
import type { ServerContext } from '../routes/server-context.js';
import { V2_EXTENSIONS, modelMetadata, modelReady, serverReady } from '../routes/v2-metadata.js';
import { grpcStatusName, toGrpcError } from './grpc-status.js';
import type { RequestDecoder } from './proto.js';

type Handler<Req, Res> = (request: Req, call: ServerUnaryCall<Buffer, Res>) => Res | Promise<Res>;

/** The `inference` messages that name a model (ModelReady and ModelMetadata). */
interface ModelRef {
  readonly name: string;
  readonly version: string;
}

/** A ModelInferRequest as the main thread sees it: its model, and its bytes for the worker. */
interface InferBytes {
  readonly model_name: string;
  readonly model_version: string;
  readonly message: Buffer;
}

/**
 * `inference.GRPCInferenceService` over the server's models, queues and metrics. Requests
 * arrive as bytes and are parsed here with `decoders` (see bytesInServiceDefinition), but for
 * ModelInfer's: only its model is read here, and its tensors are decoded where the model runs.
 */
export function inferenceService(
  server: ServerContext,
  protoDecoders: ReadonlyMap<string, RequestDecoder>,
): UntypedServiceImplementation {
  const decoders = new Map(protoDecoders).set('ModelInfer', (message): InferBytes => {
    const { model, version } = grpcInferTarget(message);
    return { model_name: model, model_version: version, message };
  });
  const unary =
    <Req, Res>(method: string, handler: Handler<Req, Res>) =>
    (call: ServerUnaryCall<Buffer, Res>, callback: sendUnaryData<Res>) => {
      const started = performance.now();
      let model = '';
      const finish = (status: string) => {
        const labels = { api: 'grpc', route: method, model };
        server.metrics.requests.inc({ ...labels, status });
        server.metrics.requestSeconds.observe(labels, (performance.now() - started) / 1000);
      };
      // An async function, so that a synchronous throw becomes a status too.
      void (async () => {
        const request = decodeRequest(decoders, method, call.request) as Req;
        model = modelOf(request);
        return handler(request, call);
      })().then(
        (response) => {
          finish('OK');
          callback(null, response);
        },
        (error: unknown) => {
          const { code, details } = toGrpcError(error);
          finish(grpcStatusName(code));
          if (!(error instanceof KilnError))
            server.log.error({ err: error, method }, 'gRPC call failed');
          callback({ code, details, metadata: new Metadata() });
        },
      );
    };

  return {
    ServerLive: unary('ServerLive', () => ({ live: true })),
    ServerReady: unary('ServerReady', () => ({ ready: serverReady(server) })),
    ModelReady: unary<ModelRef, { ready: boolean }>('ModelReady', (request) => ({
      ready: modelReady(server, request.name, request.version || undefined),
    })),
    ServerMetadata: unary('ServerMetadata', () => ({
      name: 'kiln',
      version: server.version,
      extensions: [...V2_EXTENSIONS],
    })),
    ModelMetadata: unary<ModelRef, unknown>('ModelMetadata', (request) =>
      modelMetadata(server, request.name, request.version || undefined),
    ),
    ModelInfer: unary<InferBytes, Buffer>('ModelInfer', (request, call) =>
      modelInfer(server, request, call),
    ),
  };
}

/**
 * One inference through the model's queue: the request's bytes move to the worker, which
 * decodes them and answers the ModelInferResponse's bytes (as HTTP v2 bodies are served). The
 * client's deadline bounds the time the job may wait in the queue, and a call the client
 * cancels (or whose deadline passes) cancels the job, queued or running.
 */
async function modelInfer(
  server: ServerContext,
  request: InferBytes,
  call: ServerUnaryCall<Buffer, Buffer>,
): Promise<Buffer> {
  if (!server.accepting) throw new KilnError(KilnErrorCode.Closed, 'server is shutting down');
  const version = request.model_version || undefined;
  const entry = server.models.get(request.model_name, version);
  const remainingMs = msUntil(call.getDeadline());
  if (remainingMs <= 0) throw new KilnError(KilnErrorCode.Timeout, 'deadline exceeded');
  const handle = server.models.submit(
    entry.name,
    version,
    {
      body: request.message,
      v2: { headerLength: undefined, model: entry.name, version: entry.version, grpc: true },
      rawTensors: true,
      // grpc-js joined the message's frames into a new buffer (pooled when small, and then
      // copied to the worker: see TransferList), which nothing else reads (see proto.ts).
      owned: true,
      maxDecodedBytes: server.config.maxRequestSize,
    },
    Number.isFinite(remainingMs)
      ? { timeoutMs: Math.min(remainingMs, server.config.predictTimeoutMs) }
      : {},
  );
  // Cancelled through the job: no AbortController and abort listener to make per call.
  const onCancelled = () => handle.cancel('client cancelled the call');
  call.once('cancelled', onCancelled);
  if (call.cancelled) onCancelled();
  try {
    const output = await handle.result;
    if (output.type !== 'bytes')
      throw new KilnError(KilnErrorCode.Internal, `model ${entry.name} gave no gRPC reply`);
    return Buffer.from(output.body.buffer, output.body.byteOffset, output.body.byteLength);
  } finally {
    call.off('cancelled', onCancelled);
  }
}

/** The request message, or INVALID_ARGUMENT (through InvalidInput) when its bytes are no such message. */
function decodeRequest(
  decoders: ReadonlyMap<string, RequestDecoder>,
  method: string,
  bytes: Buffer,
): unknown {
  try {
    return decoders.get(method)!(bytes);
  } catch (error) {
    if (error instanceof KilnError) throw error; // ModelInfer's reader names the problem itself
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `the ${method} request is not a valid protobuf message: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

function msUntil(deadline: Date | number): number {
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return at === Infinity ? Infinity : at - Date.now();
}

function modelOf(request: unknown): string {
  const r = request as { model_name?: unknown; name?: unknown } | undefined;
  const name = r?.model_name ?? r?.name;
  return typeof name === 'string' ? name : '';
}
