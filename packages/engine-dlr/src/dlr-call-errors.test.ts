import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KilnError, NDList, Tensor } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { DlrEngine } from './dlr-engine.js';
import { probeDlr } from './probe.js';
import { ModelFolders, affineGraph, useConformanceLibrary } from './test-support/models.js';

// Every DLR call the engine makes fails once here (the conformance library's injected
// faults): each becomes a KilnError with a stable code, DLR's function and DLR's message,
// and no failure leaves a DLR model behind.

await useConformanceLibrary();
const availability = await checkEngine('DLR', probeDlr);

const LOAD_CALLS: [string, string][] = [
  ['CreateDLRModel', 'MODEL_LOAD_FAILED'],
  ['SetDLRNumThreads', 'INVALID_CONFIG'],
  ['GetDLRNumInputs', 'MODEL_LOAD_FAILED'],
  ['GetDLRInputName', 'MODEL_LOAD_FAILED'],
  ['GetDLRInputType', 'MODEL_LOAD_FAILED'],
  ['GetDLRInputSizeDim', 'MODEL_LOAD_FAILED'],
  ['GetDLRInputShape', 'MODEL_LOAD_FAILED'],
  ['GetDLRNumOutputs', 'MODEL_LOAD_FAILED'],
  ['GetDLRHasMetadata', 'MODEL_LOAD_FAILED'],
  ['GetDLROutputName', 'MODEL_LOAD_FAILED'],
  ['GetDLROutputType', 'MODEL_LOAD_FAILED'],
  ['GetDLROutputSizeDim', 'MODEL_LOAD_FAILED'],
  ['GetDLROutputShape', 'MODEL_LOAD_FAILED'],
  ['GetDLRBackend', 'MODEL_LOAD_FAILED'],
];

const RUN_CALLS: [string, string, 'faults' | 'runFaults'][] = [
  ['SetDLRInput', 'INVALID_INPUT', 'faults'],
  ['RunDLRModel', 'ENGINE_ERROR', 'faults'],
  ['GetDLROutputSizeDim', 'ENGINE_ERROR', 'runFaults'],
  ['GetDLROutputShape', 'ENGINE_ERROR', 'runFaults'],
  ['GetDLROutput', 'ENGINE_ERROR', 'faults'],
];

describe.skipIf(!availability.run)('DLR errors from every call', () => {
  let engine: DlrEngine;
  let baseline: number;
  const folders = new ModelFolders(mkdtempSync(join(tmpdir(), 'kiln-dlr-errors-')));

  beforeAll(async () => {
    engine = await DlrEngine.load();
    baseline = (await folders.stats(engine)).liveModels;
  });
  afterAll(async () => {
    // Nothing any failure below left behind is still alive.
    expect((await folders.stats(engine)).liveModels).toBe(baseline);
    rmSync(folders.root, { recursive: true, force: true });
  });

  it.each(LOAD_CALLS)('loading: %s becomes %s with DLR’s message', async (call, code) => {
    const { graph, params } = affineGraph({ faults: { [call]: `injected ${call} failure` } });
    const error = await folders.load(engine, graph, params).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KilnError);
    expect((error as KilnError).code).toBe(code);
    expect((error as Error).message).toContain(
      `DLR ${call} failed: ${call}: injected ${call} failure`,
    );
  });

  it.each(RUN_CALLS)('running: %s becomes %s with DLR’s message', async (call, code, kind) => {
    const { graph, params } = affineGraph({ [kind]: { [call]: `injected ${call} failure` } });
    const model = await folders.load(engine, graph, params);
    const context = await model.newExecutionContext();
    const x = NDList.of(new Tensor('float32', new Float32Array(4), [1, 4], 'x'));
    // A runFault arms after the first successful run.
    if (kind === 'runFaults') await context.forward(x).catch(() => undefined);
    const error = await context.forward(x).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KilnError);
    expect((error as KilnError).code).toBe(code);
    expect((error as Error).message).toContain(
      `DLR ${call} failed: ${call}: injected ${call} failure`,
    );
    await model.dispose();
  });
});
