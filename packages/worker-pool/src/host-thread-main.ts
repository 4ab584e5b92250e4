// Entry of a host thread: each worker it hosts loads the model from the pool's resolved
// recipe, owns one Predictor and runs the batches the pool sends — or, a step worker, owns the
// model's step decoder with its samplers and detokenizers and the rolling loop over them,
// serving the generation jobs the pool hands over. A thread hosts one worker,
// or every worker of an engine that loads in one thread per process (tfjs-node). Nothing is
// shared with the main thread but messages.
import { parentPort, threadId, workerData } from 'node:worker_threads';
import { SequenceStepper } from '@kiln/batching';
import {
  KilnError,
  KilnErrorCode,
  type Model,
  type PackedOutputs,
  Predictor,
  type PredictResult,
  type PredictTimings,
  type ServingInput,
  type ServingInputMessage,
  type ServingOutput,
  TransferList,
  type TransferMode,
  loadResolvedModel,
  loadTextTokenizer,
  packServingOutputs,
  servingInputFromMessage,
  servingOutputToMessage,
  servingOutputViews,
} from '@kiln/core';
import { pinCurrentThread, type PinResult } from './cpu-pinning.js';
import { probeForward } from './forward-probe.js';
import { GenerationHost } from './generation-host.js';
import { engineCatalogFor, preloadEngineFor, servingTranslator } from './recipe-plan.js';
import type { HostHints } from './prestart.js';
import { planThreads } from './thread-budget.js';
import { lowerThreadPriority, type PriorityResult } from './thread-priority.js';
import type { FromHost, ResultMessage, ToHost, WorkerInit } from './worker-protocol.js';
import { signatureOf } from './worker-protocol.js';

const port = parentPort!;

interface HostedWorker {
  readonly model: Model;
  /** A forward worker's; a step worker has a stepper instead. */
  predictor?: Predictor<ServingInput, ServingOutput>;
  stepper?: SequenceStepper;
  generation?: GenerationHost;
  /**
   * The batch it runs (one at a time: see ThreadBackend) and the controller that aborts it.
   * The controller serves batch after batch until one is aborted: making one costs more than
   * a small model's batch spends anywhere else on this thread.
   */
  running: { id: number; controller: AbortController } | undefined;
  controller: AbortController | undefined;
  timings: PredictTimings | undefined;
}

const workers = new Map<number, HostedWorker>();
const NO_ROLLING_SETTINGS = {
  maxBatchSize: undefined,
  maxPrefillTokens: undefined,
  maxKvCacheBytes: undefined,
};
// Pinning and priority are the thread's: set once, before the first model loads, so engine
// threads it starts inherit them.
let threadSettings: { pinning: PinResult | undefined; priority: PriorityResult | undefined };

function post(message: FromHost, transfer: ArrayBuffer[] = []): void {
  port.postMessage(message, transfer);
}

async function start(id: number, init: WorkerInit): Promise<void> {
  threadSettings ??= {
    pinning: init.pinCores
      ? pinCurrentThread(init.pinCores)
      : init.pinRefused
        ? { pinned: false, reason: init.pinRefused }
        : undefined,
    priority: init.nice > 0 ? lowerThreadPriority(init.nice) : undefined,
  };
  const { registry } = await engineCatalogFor(init.recipe.engines);
  const { load } = init.recipe;
  const plan = planThreads({ ...init.threads, engineOptions: load.request.options });
  // The thread is pinned; engines that place their own threads (ORT) spread them on its cores.
  const cpuCores = threadSettings.pinning?.pinned ? threadSettings.pinning.cores : undefined;
  // The pool's group decides the device; the thread budget is known before the model loads.
  const model = await loadResolvedModel(
    {
      ...load,
      device: init.device,
      request: {
        ...load.request,
        ...(plan.intraOpThreads === undefined ? {} : { intraOpThreads: plan.intraOpThreads }),
        ...(cpuCores ? { cpuCores } : {}),
      },
    },
    registry,
  );
  try {
    const hosted: HostedWorker = {
      model,
      running: undefined,
      controller: undefined,
      timings: undefined,
    };
    const contextOptions = {
      ...(plan.intraOpThreads === undefined ? {} : { intraOpThreads: plan.intraOpThreads }),
      ...(cpuCores ? { cpuCores } : {}),
    };
    if (init.kind === 'step') {
      const stepper = await startStepper(model, load.request.modelDir, contextOptions, (error) =>
        post({ type: 'lost', worker: id, error: error.toJSON() }),
      );
      hosted.stepper = stepper;
      hosted.generation = new GenerationHost(stepper, init.rolling ?? NO_ROLLING_SETTINGS, (news) =>
        post({ type: 'generated', worker: id, ...news }),
      );
    } else {
      // Serving workers also answer raw tensor requests (the v2 protocol) past the translator.
      const translator = await servingTranslator(model, init.recipe.translator);
      hosted.predictor = await Predictor.create(model, translator, {
        ...contextOptions,
        onTimings: (t) => (hosted.timings = t),
      });
    }
    const forwardProbe =
      init.probe && hosted.predictor
        ? await probeForward(model, hosted.predictor, init.probe)
        : undefined;
    workers.set(id, hosted);
    post({
      type: 'ready',
      worker: id,
      facts: {
        threadId,
        intraOpThreads: plan.intraOpThreads,
        threadSource: plan.source,
        pinning: threadSettings.pinning,
        priority: threadSettings.priority,
        engine: model.engine,
        model: model.describe(),
        signature: signatureOf(model),
        ...(forwardProbe ? { forwardProbe } : {}),
        ...(hosted.stepper ? { step: hosted.stepper.info } : {}),
      },
    });
  } catch (error) {
    await model.dispose();
    throw error;
  }
}

/**
 * A step worker's decoder, with the folder's tokenizer for its streaming detokenizers;
 * `onLost` hears of a decoder that can step no more (its process died), to end the worker.
 */
async function startStepper(
  model: Model,
  modelDir: string,
  options: { intraOpThreads?: number; cpuCores?: readonly number[] },
  onLost: (error: KilnError) => void,
): Promise<SequenceStepper> {
  if (!model.newStepDecoder)
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${model.engine} models do not decode step by step (option.rolling_batch)`,
    );
  const tokenizer = await loadTextTokenizer(modelDir);
  const decoder = await model.newStepDecoder(options);
  // Exported models may pad their logits past the vocabulary (GPT-2's 50257 to 50304).
  if (tokenizer.vocabSize > decoder.vocabSize) {
    await decoder.close?.();
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `the tokenizer has ${tokenizer.vocabSize} tokens but the model's logits only ${decoder.vocabSize}`,
    );
  }
  decoder.onLost?.(onLost);
  const stepper = new SequenceStepper(decoder, tokenizer);
  // The grammar engine's view of a large vocabulary takes a while to build: at start, not in
  // the middle of the first response_format request's steps (and everyone's with it).
  await stepper.prepareResponseFormats();
  return stepper;
}

/** Sends a batch's results; values that cannot cross threads fail alone, not the batch. */
function postResults(
  worker: number,
  id: number,
  results: readonly PredictResult<ServingOutput>[],
  timings: PredictTimings | undefined,
  mode: TransferMode,
): void {
  // A batch of plain tensor answers crosses column by column: a few arrays, moved.
  const packed =
    results.length > 1 && results.every((r) => r.ok)
      ? packServingOutputs(results.map((r) => (r as { value: ServingOutput }).value))
      : undefined;
  if (packed) {
    postPacked(worker, id, results, packed, timings);
    return;
  }
  // A batch's answers are views of one output: their copies share one buffer (see TransferList).
  const views = results.flatMap((r) => (r.ok ? [...servingOutputViews(r.value)] : []));
  const transfer = new TransferList(mode, { reserveBytes: TransferList.bytesToCopy(mode, views) });
  const messages = results.map((r) => encodeResult(r, transfer));
  try {
    post({ type: 'results', worker, id, results: messages, timings }, transfer.transfer);
  } catch (error) {
    if (mode === 'move') return postResults(worker, id, results, timings, 'copy');
    const safe = messages.map((m) => cloneable(m, error));
    post({ type: 'results', worker, id, results: safe, timings });
  }
}

/**
 * Sends packed answers with their columns' buffers moved; memory that refuses to move (an
 * engine's external buffer) is copied instead.
 */
function postPacked(
  worker: number,
  id: number,
  results: readonly PredictResult<ServingOutput>[],
  packed: PackedOutputs,
  timings: PredictTimings | undefined,
): void {
  // Empty columns are cloned, not listed (see TransferList).
  const moved = (columns: PackedOutputs) => [
    ...new Set(columns.data.filter((c) => c.byteLength > 0).map((c) => c.buffer as ArrayBuffer)),
  ];
  try {
    post({ type: 'results', worker, id, results: [], packed, timings }, moved(packed));
  } catch {
    const values = results.map((r) => (r as { value: ServingOutput }).value);
    const copied = packServingOutputs(values, { copy: true })!;
    post({ type: 'results', worker, id, results: [], packed: copied, timings }, moved(copied));
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
  workerId: number,
  id: number,
  messages: readonly ServingInputMessage[],
): Promise<void> {
  const worker = workers.get(workerId);
  if (!worker?.predictor) {
    const error = new KilnError(KilnErrorCode.Internal, `worker ${workerId} is not hosted here`);
    post({ type: 'run-failed', worker: workerId, id, error: error.toJSON() });
    return;
  }
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
  if (worker.controller?.signal.aborted) worker.controller = undefined;
  const controller = (worker.controller ??= new AbortController());
  worker.running = { id, controller };
  worker.timings = undefined;
  try {
    const settled =
      inputs.length === 0
        ? []
        : await worker.predictor.batchPredictSettled(inputs, { signal: controller.signal });
    settled.forEach((result, k) => (results[positions[k]!] = result));
    postResults(workerId, id, results, worker.timings, 'move');
  } catch (error) {
    post({
      type: 'run-failed',
      worker: workerId,
      id,
      error: KilnError.wrap(error, KilnErrorCode.WorkerCrashed, 'the worker failed').toJSON(),
    });
  } finally {
    if (worker.running?.id === id) worker.running = undefined;
  }
}

async function endProfiling(workerId: number, id: number, skipRuns: number | undefined) {
  try {
    const predictor = workers.get(workerId)?.predictor;
    if (!predictor)
      throw new KilnError(KilnErrorCode.Internal, `worker ${workerId} runs no predictor`);
    const value = await predictor.endProfiling(skipRuns === undefined ? {} : { skipRuns });
    post({ type: 'profile', worker: workerId, id, result: { ok: true, value } });
  } catch (error) {
    const failure = KilnError.wrap(error, KilnErrorCode.EngineError).toJSON();
    post({ type: 'profile', worker: workerId, id, result: { ok: false, error: failure } });
  }
}

async function stop(workerId: number): Promise<void> {
  const worker = workers.get(workerId);
  workers.delete(workerId);
  if (worker) {
    await worker.predictor?.close().catch(() => undefined);
    await worker.generation?.close().catch(() => undefined);
    await worker.stepper?.close().catch(() => undefined);
    await worker.model.dispose().catch(() => undefined);
  }
  post({ type: 'stopped', worker: workerId });
}

port.on('message', (message: ToHost) => {
  switch (message.type) {
    case 'start':
      start(message.worker, message.init).catch((error: unknown) =>
        post({
          type: 'start-failed',
          worker: message.worker,
          error: KilnError.wrap(
            error,
            KilnErrorCode.ModelLoadFailed,
            'the worker could not start',
          ).toJSON(),
        }),
      );
      return;
    case 'run':
      void runBatch(message.worker, message.id, message.inputs);
      return;
    case 'generate':
      workers.get(message.worker)?.generation?.take(message.jobs);
      return;
    case 'generate-cancel':
      workers.get(message.worker)?.generation?.cancel(message.ids);
      return;
    case 'generate-hold':
      workers.get(message.worker)?.generation?.hold(message.id, message.held);
      return;
    case 'abort': {
      const running = workers.get(message.worker)?.running;
      if (running?.id === message.id)
        running.controller.abort(
          new KilnError(KilnErrorCode.Cancelled, 'every request of the batch was cancelled'),
        );
      return;
    }
    case 'end-profiling':
      void endProfiling(message.worker, message.id, message.skipRuns);
      return;
    case 'stop':
      void stop(message.worker);
      return;
  }
});

// A thread started ahead of its worker loads the engine its model will need meanwhile; the
// worker's own load reports any failure.
const { preloadModels } = (workerData ?? {}) as HostHints;
if (preloadModels?.[0] !== undefined)
  void preloadEngineFor(preloadModels[0]).catch(() => undefined);
