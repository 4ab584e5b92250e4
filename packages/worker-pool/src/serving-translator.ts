import { batchifierFor } from '@kiln/batching';
import {
  KilnError,
  KilnErrorCode,
  type Model,
  type SequenceBatching,
  type ServingInput,
  type ServingOutput,
  type Translator,
  sequenceBatchingFrom,
} from '@kiln/core';

/**
 * The translator batching with the batchifier the model's serving.properties names
 * (`batchifier=pad|bucket|…`) in place of its stack batchifier; as it is when none is named.
 */
export function withConfiguredBatchifier(
  translator: Translator<ServingInput, ServingOutput>,
  model: Model,
): Translator<ServingInput, ServingOutput> {
  const settings = sequenceBatchingFrom(model.properties.raw);
  if (settings === undefined) return translator;
  checkAgainstModel(settings, model, translator);
  return { ...translator, batchifier: batchifierFor(settings) };
}

/** Refuses settings that name inputs the model lacks, or a translator that batches its own way. */
function checkAgainstModel(
  settings: SequenceBatching,
  model: Model,
  translator: Translator<ServingInput, ServingOutput>,
): void {
  const own = translator.batchifier;
  if (own !== null && own.name !== 'stack') {
    throw invalid(
      `batchifier=${settings.batchifier}: the model's translator batches with its own ${own.name} batchifier`,
    );
  }
  const inputs = model.inputs.map((d) => d.name);
  if (inputs.length === 0) return;
  const named = [
    ...(settings.bucketBy === undefined ? [] : [['bucket_by', settings.bucketBy]]),
    ...(typeof settings.padValue === 'object'
      ? Object.keys(settings.padValue).map((name) => ['pad_value', name])
      : []),
  ];
  for (const [key, name] of named) {
    if (!inputs.includes(name!))
      throw invalid(`${key} names ${name}, which is no input of the model (${inputs.join(', ')})`);
  }
}

function invalid(message: string): KilnError {
  return new KilnError(KilnErrorCode.InvalidConfig, `serving.properties ${message}`);
}
