import { KilnError, KilnErrorCode, type TensorDescriptor } from '@kiln/core';
import type { InputFile } from '../inputs/bench-input.js';
import {
  type PreparedRequest,
  type Protocol,
  fileRequest,
  tensorRequest,
} from '../inputs/http-bodies.js';
import {
  checkSpecsAgainst,
  specsFromSignature,
  syntheticTensors,
} from '../inputs/synthetic-tensors.js';
import { levelResult } from '../load/level-result.js';
import { measureConcurrency, measureRate } from '../load/measure-level.js';
import { type InputSpec, formatShapes } from '../options/shapes.js';
import { NO_PROGRESS, type ProgressReporter } from '../progress.js';
import type { HttpResult, LevelResult, LoadMode } from '../results.js';
import type { PrometheusSamples } from '../stats/prometheus.js';
import type { StabilityRule } from '../stats/stability.js';
import { HttpSender } from './http-client.js';
import { ServerMetricsReader } from './server-split.js';
import { fetchV2Inputs } from './v2-metadata.js';

export interface HttpBenchOptions {
  /** The server's inference address, e.g. http://127.0.0.1:8080. */
  readonly server: string;
  readonly model: string;
  readonly version?: string | undefined;
  readonly protocol: Protocol;
  /** `-s`; read from the server's v2 metadata when left out. */
  readonly inputs?: readonly InputSpec[] | undefined;
  /** Input names, when the server does not describe them. */
  readonly inputNames?: readonly string[] | undefined;
  /** A body sent as it is to /predictions instead of synthetic tensors. */
  readonly inputFile?: InputFile | undefined;
  readonly mode: LoadMode;
  /** Concurrencies, or request rates (per second). */
  readonly levels: readonly number[];
  readonly windowMs: number;
  readonly maxWindows: number;
  readonly stability?: StabilityRule | undefined;
  /** The server's Prometheus endpoint (Kiln: http://127.0.0.1:8082/metrics), for the server-side split. */
  readonly metricsUrl?: string | undefined;
  /** Per-request limit, ms. */
  readonly timeoutMs?: number | undefined;
  /** Rate mode: most requests in flight before new ones fail. */
  readonly maxOutstanding?: number | undefined;
  readonly progress?: ProgressReporter | undefined;
}

/**
 * Measures a running server level by level: closed-loop concurrency or open-loop request
 * rate, each level until its windows agree (perf_analyzer's rule), with the server's own
 * split of the time read from its metrics when a metrics URL is given.
 */
export async function runHttpBench(options: HttpBenchOptions): Promise<HttpResult> {
  const base = parseServerUrl(options.server);
  const progress = options.progress ?? NO_PROGRESS;
  const { request, label } = await prepareRequest(base, options);
  const maxOutstanding = options.maxOutstanding ?? 1024;
  const maxSockets = options.mode === 'concurrency' ? Math.max(...options.levels) : maxOutstanding;
  const sender = new HttpSender(base, request, {
    maxSockets,
    timeoutMs: options.timeoutMs ?? 30_000,
  });
  const metrics = options.metricsUrl
    ? new ServerMetricsReader(parseServerUrl(options.metricsUrl, 'metrics URL'), options.model)
    : undefined;
  try {
    // One request first: a wrong model name, shape or protocol fails here with the server's reason.
    await sender.send().catch((error: unknown) => {
      throw KilnError.wrap(error, KilnErrorCode.InvalidInput, 'the first request failed');
    });
    progress.start(options.levels.length * options.maxWindows, `${options.mode} sweep`);
    const levels: LevelResult[] = [];
    for (const [index, level] of options.levels.entries()) {
      const readings: PrometheusSamples[] = [];
      const measureOptions = {
        windowMs: options.windowMs,
        maxWindows: options.maxWindows,
        ...(options.stability ? { stability: options.stability } : {}),
        beforeWindow: metrics
          ? async (i: number) => void (readings[i] = await metrics.read())
          : undefined,
        onWindow: (i: number, sample: { throughput: number }) =>
          progress.update(
            index * options.maxWindows + i + 1,
            `${options.mode} ${level}: ${sample.throughput.toFixed(1)}/s`,
          ),
      };
      const measured =
        options.mode === 'concurrency'
          ? await measureConcurrency(sender.send, level, measureOptions)
          : await measureRate(sender.send, level, { ...measureOptions, maxOutstanding });
      const server = metrics
        ? metrics.split(readings[measured.firstCountedWindow]!, await metrics.read())
        : undefined;
      levels.push(levelResult(measured, server));
      progress.update((index + 1) * options.maxWindows);
    }
    progress.stop();
    return {
      kind: 'http',
      server: base.origin,
      model: options.model,
      protocol: options.protocol,
      mode: options.mode,
      inputs: label,
      windowMs: options.windowMs,
      levels,
    };
  } finally {
    progress.stop();
    sender.close();
  }
}

async function prepareRequest(
  base: URL,
  options: HttpBenchOptions,
): Promise<{ request: PreparedRequest; label: string }> {
  const target = { protocol: options.protocol, model: options.model, version: options.version };
  if (options.inputFile) {
    if (options.protocol !== 'predictions') {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `an input file is sent as it is to /predictions, not with --protocol ${options.protocol}`,
      );
    }
    const { name, body, contentType } = options.inputFile;
    return { request: fileRequest(target, body, contentType), label: name };
  }
  const described =
    options.inputs && options.protocol === 'predictions' && options.inputNames === undefined
      ? undefined
      : await fetchV2Inputs(base, options.model, options.version);
  const specs = options.inputs ?? specsFromDescription(described, options.model);
  if (described && described.length > 0) checkSpecsAgainst(specs, described);
  const names = options.inputNames ?? described?.map((d) => d.name) ?? [];
  return {
    request: tensorRequest(target, syntheticTensors(specs, names)),
    label: formatShapes(specs),
  };
}

function specsFromDescription(
  described: TensorDescriptor[] | undefined,
  model: string,
): InputSpec[] {
  if (!described || described.length === 0) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `the server does not describe the inputs of ${model}: give their shapes with -s`,
      {
        details: { hint: 'e.g. -s (1,3,224,224)f; run `kiln inspect <model>` to see them' },
      },
    );
  }
  return specsFromSignature(described);
}

function parseServerUrl(text: string, what = 'server URL'): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `${what} ${JSON.stringify(text)} is not a URL`,
      {
        details: { hint: 'e.g. --server http://127.0.0.1:8080' },
      },
    );
  }
  if (url.protocol !== 'http:') {
    throw new KilnError(KilnErrorCode.InvalidInput, `${what} ${text}: only http:// is supported`, {
      details: { hint: 'benchmark the server directly, not through a TLS proxy' },
    });
  }
  return url;
}
