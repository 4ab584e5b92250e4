import {
  KilnError,
  KilnErrorCode,
  type NDList,
  type TensorDescriptor,
  inspectModelSource,
  loadModel,
} from '@kiln/core';
import {
  type InputSpec,
  type ProgressReporter,
  checkSpecsAgainst,
  formatShapes,
  specsFromSignature,
  syntheticTensors,
} from '@kiln/benchmark';
import {
  ENGINE_NAME as ORT_ENGINE,
  type OrtProfile,
  OrtExecutionContext,
} from '@kiln/engine-onnxruntime';
import type { EngineCatalog } from '@kiln/server';

export interface LayerProfileOptions {
  /** Input shapes; the model's own (dynamic dimensions as 1) when left out. */
  readonly inputs: readonly InputSpec[] | undefined;
  readonly runs: number;
  readonly warmup: number;
  readonly overrides: Readonly<Record<string, string>>;
  readonly progress: ProgressReporter;
}

export interface LayerProfile {
  readonly model: string;
  readonly engine: string;
  readonly engineVersion: string;
  readonly inputs: string;
  readonly signature: readonly TensorDescriptor[];
  readonly profile: OrtProfile;
}

/**
 * Runs a model with its engine's per-node profiler on: `warmup` runs left out, then `runs`
 * counted. Only ONNX Runtime has such a profiler; other engines are refused up front,
 * before anything loads.
 */
export async function profileLayers(
  url: string,
  engines: EngineCatalog,
  options: LayerProfileOptions,
): Promise<LayerProfile> {
  const inspection = await inspectModelSource(url, {
    registry: engines.registry,
    overrides: options.overrides,
  });
  const engineName = inspection.engineName ?? 'no recognised engine';
  if (engineName.toLowerCase() !== ORT_ENGINE.toLowerCase()) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `per-layer profiling is not supported by ${engineName}`,
      {
        details: {
          hint: `it needs ONNX Runtime's profiler (OnnxRuntime models); \`kiln bench -u ${url}\` times any engine end to end`,
        },
      },
    );
  }
  const model = await loadModel(url, {
    registry: engines.registry,
    overrides: { ...options.overrides, 'option.profiling': 'true' },
  });
  try {
    const specs = options.inputs ?? specsFromSignature(model.inputs);
    checkSpecsAgainst(specs, model.inputs);
    const inputs: NDList = syntheticTensors(
      specs,
      model.inputs.map((d) => d.name),
    );
    const context = await model.newExecutionContext();
    try {
      if (!(context instanceof OrtExecutionContext)) {
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `per-layer profiling is not supported by ${model.engine}`,
        );
      }
      options.progress.start(options.warmup + options.runs, 'profiling');
      for (let i = 0; i < options.warmup + options.runs; i++) {
        await context.forward(inputs);
        options.progress.update(i + 1);
      }
      options.progress.stop();
      const profile = await context.endProfiling({ skipRuns: options.warmup });
      const engine = await engines.registry.get(model.engine);
      return {
        model: model.name,
        engine: model.engine,
        engineVersion: engine.version,
        inputs: formatShapes(specs),
        signature: model.inputs,
        profile,
      };
    } finally {
      options.progress.stop();
      await context.close();
    }
  } finally {
    await model.dispose();
  }
}
