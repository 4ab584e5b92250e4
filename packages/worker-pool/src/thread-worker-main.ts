import { signatureOf } from './worker-protocol.js';
// Entry of a thread worker: loads the engine and the model, owns one Predictor and runs the
// batches the pool sends. Nothing here is shared with the main thread but messages.
import { threadId, parentPort, workerData } from 'node:worker_threads';
import {
  EngineRegistry,
  type EngineProvider,
  KilnError,
  KilnErrorCode,
  type Model,
  Predictor,
  type PredictResult,
  type PredictTimings,
  type ServingInput,
  type ServingInputMessage,
  type ServingOutput,
  type Translator,
  type TranslatorFactory,
  TransferList,
  type TransferMode,
  assertTranslator,
  loadModel,
  parseDevice,
  resolveTranslator,
  withRawTensorPath,
  servingInputFromMessage,
  servingOutputToMessage,
} from '@kiln/core';
import { pinCurrentThread, type PinResult } from './cpu-pinning.js';
import { planThreads } from './thread-budget.js';
import { lowerThreadPriority } from './thread-priority.js';
import type { FromWorker, ResultMessage, ThreadWorkerInit, ToWorker } from './worker-protocol.js';

const init = (workerData as { init: ThreadWorkerInit }).init;
const port = parentPort!;

function post(message: FromWorker, transfer: ArrayBuffer[] = []): void {
  port.postMessage(message, transfer);
}

async function importProvider(specifier: string): Promise<EngineProvider> {
  const module = (await import(specifier)) as {
    provider?: EngineProvider;
    default?: EngineProvider;
  };
  const provider = module.provider ?? module.default;
  if (!provider || typeof provider.load !== 'function') {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `engine module ${specifier} exports no provider (as \`provider\` or default)`,
    );
  }
  return provider;
}

async function translatorFor(model: Model): Promise<Translator<ServingInput, ServingOutput>> {
  const specifier = init.recipe.translator;
  if (specifier === undefined) return resolveTranslator(model);
  const module = (await import(specifier)) as {
    translatorFactory?: TranslatorFactory<ServingInput, ServingOutput>;
  };
  if (typeof module.translatorFactory?.newInstance !== 'function') {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `translator module ${specifier} exports no translatorFactory`,
    );
  }
  return assertTranslator(
    await module.translatorFactory.newInstance(model, model.properties.raw),
    `translator module ${specifier}`,
  );
}

async function start(): Promise<{
  model: Model;
  predictor: Predictor<ServingInput, ServingOutput>;
}> {
  // Pinned and niced first: engine threads started by the model load inherit both.
  const pinning: PinResult | undefined = init.pinCores
    ? pinCurrentThread(init.pinCores)
    : undefined;
  const priority = init.nice > 0 ? lowerThreadPriority(init.nice) : undefined;
  const registry = new EngineRegistry();
  for (const specifier of init.recipe.engines) registry.register(await importProvider(specifier));
  const model = await loadModel(init.recipe.url, {
    registry,
    device: parseDevice(init.device),
    ...(init.recipe.overrides ? { overrides: init.recipe.overrides } : {}),
  });
  try {
    // Serving workers also answer raw tensor requests (the v2 protocol) past the translator.
    const translator = withRawTensorPath(await translatorFor(model));
    const plan = planThreads({ ...init.threads, engineOptions: model.properties.options });
    const predictor = await Predictor.create(model, translator, {
      ...(plan.intraOpThreads === undefined ? {} : { intraOpThreads: plan.intraOpThreads }),
      onTimings: (t) => (timings = t),
    });
    post({
      type: 'ready',
      facts: {
        threadId,
        intraOpThreads: plan.intraOpThreads,
        threadSource: plan.source,
        pinning,
        priority,
        engine: model.engine,
        model: model.describe(),
        signature: signatureOf(model),
      },
    });
    return { model, predictor };
  } catch (error) {
    await model.dispose();
    throw error;
  }
}

let timings: PredictTimings | undefined;
const aborts = new Map<number, AbortController>();

/** Sends a batch's results; values that cannot cross threads fail alone, not the batch. */
function postResults(
  id: number,
  results: readonly PredictResult<ServingOutput>[],
  mode: TransferMode,
): void {
  const transfer = new TransferList(mode);
  const messages = results.map((r) => encodeResult(r, transfer));
  try {
    post({ type: 'results', id, results: messages, timings }, transfer.transfer);
  } catch (error) {
    if (mode === 'move') return postResults(id, results, 'copy');
    post({ type: 'results', id, results: messages.map((m) => cloneable(m, error)), timings });
  }
}

function encodeResult(result: PredictResult<ServingOutput>, transfer: TransferList): ResultMessage {
  if (!result.ok) return { ok: false, error: result.error.toJSON() };
  try {
    return { ok: true, value: servingOutputToMessage(result.value, transfer) };
  } catch (error) {
    return {
      ok: false,
      error: KilnError.wrap(
        error,
        KilnErrorCode.Internal,
        'the translator returned an unusable output',
      ).toJSON(),
    };
  }
}

function cloneable(message: ResultMessage, cause: unknown): ResultMessage {
  try {
    structuredClone(message);
    return message;
  } catch {
    const reason = cause instanceof Error ? cause.message : String(cause);
    return {
      ok: false,
      error: new KilnError(
        KilnErrorCode.Internal,
        `the output cannot be sent to the main thread: ${reason}`,
      ).toJSON(),
    };
  }
}

/** Runs a batch; an input that arrived malformed fails alone, the others still run. */
async function runBatch(
  predictor: Predictor<ServingInput, ServingOutput>,
  id: number,
  messages: readonly ServingInputMessage[],
): Promise<void> {
  const results: PredictResult<ServingOutput>[] = new Array(messages.length);
  const inputs: ServingInput[] = [];
  const positions: number[] = [];
  messages.forEach((message, i) => {
    try {
      inputs.push(servingInputFromMessage(message));
      positions.push(i);
    } catch (error) {
      results[i] = { ok: false, error: KilnError.wrap(error, KilnErrorCode.InvalidInput) };
    }
  });
  const controller = new AbortController();
  aborts.set(id, controller);
  timings = undefined;
  try {
    const settled =
      inputs.length === 0
        ? []
        : await predictor.batchPredictSettled(inputs, { signal: controller.signal });
    settled.forEach((result, k) => (results[positions[k]!] = result));
    postResults(id, results, 'move');
  } catch (error) {
    post({
      type: 'run-failed',
      id,
      error: KilnError.wrap(error, KilnErrorCode.WorkerCrashed, 'the worker failed').toJSON(),
    });
  } finally {
    aborts.delete(id);
  }
}

async function stop(
  model: Model,
  predictor: Predictor<ServingInput, ServingOutput>,
): Promise<void> {
  await predictor.close().catch(() => undefined);
  await model.dispose().catch(() => undefined);
  post({ type: 'stopped' });
  port.close();
}

try {
  const { model, predictor } = await start();
  port.on('message', (message: ToWorker) => {
    switch (message.type) {
      case 'run':
        void runBatch(predictor, message.id, message.inputs);
        return;
      case 'abort':
        aborts
          .get(message.id)
          ?.abort(
            new KilnError(KilnErrorCode.Cancelled, 'every request of the batch was cancelled'),
          );
        return;
      case 'stop':
        void stop(model, predictor);
        return;
    }
  });
} catch (error) {
  post({
    type: 'start-failed',
    error: KilnError.wrap(
      error,
      KilnErrorCode.ModelLoadFailed,
      'the worker could not start',
    ).toJSON(),
  });
  port.close();
}
