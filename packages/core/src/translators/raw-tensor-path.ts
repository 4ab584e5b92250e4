import {
  type GrpcInferRequest,
  encodeGrpcInferResponse,
  parseGrpcInferRequest,
} from '../codecs/grpc-infer.js';
import {
  V2_BINARY_HEADER,
  type V2InferRequest,
  buildV2Reply,
  parseV2Request,
} from '../codecs/v2-infer.js';
import type { NDList } from '../tensor/ndlist.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import type { Translator, TranslatorContext } from '../translate/translator.js';
import { RawTensorTranslator } from './raw-tensors.js';

/**
 * The translator a serving worker runs: the model's own, plus raw tensor requests (tensors in,
 * tensors out past the model's translator) and v2 infer bodies and gRPC messages, parsed and
 * answered here. Every route's bytes cross to the worker once and are decoded there, by these
 * translators (multipart parts too: see `carriedTensors`). Raw and translated requests share
 * batches when they fit.
 */
export function withRawTensorPath(
  translator: Translator<ServingInput, ServingOutput>,
): Translator<ServingInput, ServingOutput> {
  const raw = translator instanceof RawTensorTranslator ? translator : new RawTensorTranslator();
  const v2Requests = new WeakMap<ServingInput, V2InferRequest | GrpcInferRequest>();
  return {
    batchifier: translator.batchifier,
    ...(translator.prepare
      ? { prepare: (ctx: TranslatorContext) => translator.prepare!(ctx) }
      : {}),
    processInput: (ctx: TranslatorContext, input: ServingInput) => {
      if (input.v2) {
        const body = input.body ?? new Uint8Array(0);
        const request = input.v2.grpc
          ? parseGrpcInferRequest(body, { alignInPlace: input.owned === true })
          : parseV2Request(body, input.v2.headerLength);
        v2Requests.set(input, request);
        return raw.processInput(ctx, { tensors: request.inputs });
      }
      return input.rawTensors ? raw.processInput(ctx, input) : translator.processInput(ctx, input);
    },
    processOutput: async (ctx: TranslatorContext, output: NDList, input: ServingInput) => {
      const request = v2Requests.get(input);
      if (request && input.v2) {
        const { tensors } = raw.processOutput(ctx, output) as { tensors: NDList };
        const model = { name: input.v2.model, version: input.v2.version };
        if (input.v2.grpc) {
          const body = encodeGrpcInferResponse(request as GrpcInferRequest, tensors, model);
          return { type: 'bytes', body, contentType: 'application/grpc' };
        }
        const reply = buildV2Reply(request as V2InferRequest, tensors, model);
        return reply.headerLength === undefined
          ? { type: 'json', value: reply.body }
          : {
              type: 'bytes',
              body: reply.body as Uint8Array,
              contentType: 'application/octet-stream',
              headers: { [V2_BINARY_HEADER]: String(reply.headerLength) },
            };
      }
      return input.rawTensors
        ? raw.processOutput(ctx, output)
        : translator.processOutput(ctx, output, input);
    },
  };
}
