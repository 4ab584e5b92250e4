import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { CPU, type Model, type ModelLoadRequest, NDList, readServingProperties } from '@kiln/core';
import { LIBRARY_ENV } from '@kiln/dlr-native';
import { buildConformanceLibrary } from '@kiln/dlr-native/conformance-library';
import { type DlrGraph, type DlrParam, writeDlrModelFolder } from '@kiln/testing';
import type { DlrEngine } from '../dlr-engine.js';

/**
 * Builds the conformance libdlr (once per source version) and points KILN_DLR_LIBRARY at it,
 * unless the environment already names a library. A machine without a C++ compiler keeps
 * KILN_DLR_LIBRARY unset, so the engine's probe reports it unavailable and the tests skip.
 */
export async function useConformanceLibrary(): Promise<string | undefined> {
  if (process.env[LIBRARY_ENV]) return process.env[LIBRARY_ENV];
  try {
    process.env[LIBRARY_ENV] = await buildConformanceLibrary();
    return process.env[LIBRARY_ENV];
  } catch (error) {
    console.warn(
      `[kiln] cannot build the DLR conformance library: ${error instanceof Error ? error.message : String(error)}`,
    );
    return undefined;
  }
}

export const AFFINE_WEIGHT = [1, 0.5, -1, 2, 0.25, 0, 3, -0.5];
export const AFFINE_BIAS = [0.5, -1];

/** float32 x [-1, 4] → y [-1, 2] with AFFINE_WEIGHT and AFFINE_BIAS. */
export function affineGraph(extra: Partial<DlrGraph> = {}): {
  graph: DlrGraph;
  params: Record<string, DlrParam>;
} {
  return {
    graph: {
      op: 'affine',
      inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 4] }],
      outputs: [{ name: 'y', dtype: 'float32', shape: [-1, 2] }],
      ...extra,
    },
    params: {
      weight: { dtype: 'float32', shape: [4, 2], data: AFFINE_WEIGHT },
      bias: { dtype: 'float32', shape: [2], data: AFFINE_BIAS },
    },
  };
}

export function expectedAffine(x: Float32Array): number[] {
  const out: number[] = [];
  for (let r = 0; r < x.length / 4; r++) {
    for (let c = 0; c < 2; c++) {
      let sum = AFFINE_BIAS[c]!;
      for (let k = 0; k < 4; k++) sum += x[r * 4 + k]! * AFFINE_WEIGHT[k * 2 + c]!;
      out.push(sum);
    }
  }
  return out;
}

export const STATS_GRAPH: DlrGraph = {
  op: 'stats',
  inputs: [],
  outputs: [{ name: 'counters', dtype: 'int64', shape: [6] }],
};

/** What the conformance library counts, read through its stats model. */
export interface LibraryStats {
  readonly concurrentUses: number;
  /** Handles alive, not counting the stats model's own. */
  readonly liveModels: number;
  /** Threads the stats handle was given, and TVM_NUM_THREADS when it was created (-1: unset). */
  readonly handleThreads: number;
  readonly envThreads: number;
}

/** Writes model folders under one temporary folder and loads them with an engine. */
export class ModelFolders {
  private count = 0;

  constructor(readonly root: string) {}

  async write(
    graph: DlrGraph,
    params: Record<string, DlrParam> = {},
    properties: Record<string, string> = {},
  ): Promise<string> {
    return writeDlrModelFolder(
      mkdtempSync(join(this.root, `m${++this.count}-`)),
      graph,
      params,
      properties,
    );
  }

  async request(
    modelDir: string,
    overrides: Partial<ModelLoadRequest> = {},
  ): Promise<ModelLoadRequest> {
    const properties = await readServingProperties(modelDir);
    return {
      name: `m${this.count}`,
      modelDir,
      device: CPU,
      options: properties.options,
      properties,
      ...overrides,
    };
  }

  async load(
    engine: DlrEngine,
    graph: DlrGraph,
    params: Record<string, DlrParam> = {},
    options: Record<string, string> = {},
  ): Promise<Model> {
    const dir = await this.write(graph, params);
    return engine.loadModel(await this.request(dir, { options }));
  }

  async stats(
    engine: DlrEngine,
    options: Record<string, string> = {},
    intraOpThreads?: number,
  ): Promise<LibraryStats> {
    const model = await this.load(engine, STATS_GRAPH, {}, options);
    const context = await model.newExecutionContext({ intraOpThreads });
    const values = (await context.forward(new NDList())).get(0).data as BigInt64Array;
    await model.dispose();
    return {
      concurrentUses: Number(values[0]),
      liveModels: Number(values[1]) - 1,
      handleThreads: Number(values[4]),
      envThreads: Number(values[5]),
    };
  }
}
