import { KilnError, KilnErrorCode } from '../errors.js';

/**
 * How a served model's requests are joined into batches, from serving.properties:
 * `stack` (default) joins only inputs of the same shape, `pad` pads inputs that differ in a
 * non-batch axis (sequence lengths) to the batch's longest, `bucket` pads too but lets only
 * inputs of one length bucket share a batch, `none` runs every request alone. DJL's spelling
 * `padding` reads as `pad`.
 */
export type BatchifierKind = 'stack' | 'pad' | 'bucket' | 'none';

export const BATCHIFIER_CHOICES = ['stack', 'pad', 'padding', 'bucket', 'none'] as const;

/** Length buckets when `batchifier=bucket` names none (bench/padding's). */
export const DEFAULT_BUCKET_BOUNDARIES: readonly number[] = [16, 32, 64, 128, 256, 512];

/** The sequence-batching keys of one model, parsed and checked together. */
export interface SequenceBatching {
  readonly batchifier: BatchifierKind;
  /** What padding holds: one value, or one per input name (others get 0). */
  readonly padValue: number | Readonly<Record<string, number>>;
  /** Axes that may differ and are padded (never 0); undefined: every non-batch axis. */
  readonly padAxes: readonly number[] | undefined;
  /** Upper bounds of the length buckets (`bucket` only). */
  readonly bucketBoundaries: readonly number[] | undefined;
  /** Input whose length picks the bucket; undefined: the first input. */
  readonly bucketBy: string | undefined;
  /** Axis of that input whose size is its length: the first padded axis, else 1. */
  readonly lengthAxis: number;
}

/** Keys that only mean something with a padding batchifier. */
const PAD_KEYS = ['pad_value', 'pad_axes'] as const;
const BUCKET_KEYS = ['bucket_boundaries', 'bucket_by'] as const;

/**
 * The model's sequence batching, or undefined when serving.properties sets no `batchifier`
 * (the translator's own batchifier stays). INVALID_CONFIG names the key for a bad value or a
 * key its batchifier does not read (pad_value with stack, bucket_boundaries with pad).
 */
export function sequenceBatchingFrom(
  raw: Readonly<Record<string, string>>,
): SequenceBatching | undefined {
  const value = (key: string) => {
    const text = raw[key]?.trim();
    return text === '' ? undefined : text;
  };
  const written = value('batchifier');
  const stray = [...PAD_KEYS, ...BUCKET_KEYS].filter((k) => value(k) !== undefined);
  if (written === undefined) {
    if (stray.length > 0)
      throw invalid(`${stray.join(', ')} need batchifier=pad or batchifier=bucket`);
    return undefined;
  }
  const batchifier = parseBatchifier(written);
  const pads = batchifier === 'pad' || batchifier === 'bucket';
  const unread = stray.filter(
    (k) => !pads || (batchifier === 'pad' && (BUCKET_KEYS as readonly string[]).includes(k)),
  );
  if (unread.length > 0) {
    throw invalid(
      `${unread.join(', ')} ${unread.length === 1 ? 'does' : 'do'} nothing with batchifier=${written}` +
        (batchifier === 'pad' ? ' (bucket_* keys need batchifier=bucket)' : ''),
    );
  }
  const padAxes = checked('pad_axes', value('pad_axes'), parsePadAxes);
  return {
    batchifier,
    padValue: checked('pad_value', value('pad_value'), parsePadValue) ?? 0,
    padAxes,
    bucketBoundaries:
      batchifier === 'bucket'
        ? (checked('bucket_boundaries', value('bucket_boundaries'), parseBucketBoundaries) ??
          DEFAULT_BUCKET_BOUNDARIES)
        : undefined,
    bucketBy: value('bucket_by'),
    lengthAxis: padAxes?.[0] ?? 1,
  };
}

/** `batchifier`'s value as a kind; DJL's `padding` is `pad`. */
export function parseBatchifier(text: string): BatchifierKind {
  const lower = text.trim().toLowerCase();
  if (lower === 'padding') return 'pad';
  if (lower === 'stack' || lower === 'pad' || lower === 'bucket' || lower === 'none') return lower;
  throw invalid(`batchifier=${text} is not one of ${BATCHIFIER_CHOICES.join(', ')}`);
}

/** `0`, `-1.5`, or per input: `input_ids:0,token_type_ids:1`. */
export function parsePadValue(text: string): number | Record<string, number> {
  const single = numberOf(text);
  if (single !== undefined) return single;
  const values: Record<string, number> = {};
  for (const entry of text.split(',')) {
    const at = entry.lastIndexOf(':');
    const name = entry.slice(0, at).trim();
    const number = at < 0 ? undefined : numberOf(entry.slice(at + 1));
    if (name === '' || number === undefined) {
      throw new Error(
        `must be a number, or input:number pairs split by commas (got ${JSON.stringify(text)})`,
      );
    }
    values[name] = number;
  }
  return values;
}

/** `1` or `1,2`: axes ≥ 1 (0 is the batch axis), each once. */
export function parsePadAxes(text: string): number[] {
  const axes = integers(text);
  if (axes.some((a) => a < 1) || new Set(axes).size !== axes.length) {
    throw new Error(`must be distinct integers ≥ 1, split by commas (got ${JSON.stringify(text)})`);
  }
  return axes;
}

/** `16,32,64,128`: increasing integers ≥ 1. */
export function parseBucketBoundaries(text: string): number[] {
  const bounds = integers(text);
  if (bounds.some((b, i) => b < 1 || (i > 0 && b <= bounds[i - 1]!))) {
    throw new Error(
      `must be increasing integers ≥ 1, split by commas (got ${JSON.stringify(text)})`,
    );
  }
  return bounds;
}

/** A declaration's `refuse` for one of these keys: the parser's message, or undefined. */
export function refusalOf(parse: (text: string) => unknown): (text: string) => string | undefined {
  return (text) => {
    try {
      parse(text);
      return undefined;
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  };
}

function checked<T>(key: string, text: string | undefined, parse: (text: string) => T) {
  if (text === undefined) return undefined;
  try {
    return parse(text);
  } catch (error) {
    throw invalid(`${key}=${text}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function integers(text: string): number[] {
  const parts = text.split(',').map((p) => p.trim());
  const values = parts.map((p) => (/^-?\d+$/.test(p) ? Number(p) : NaN));
  if (parts.length === 0 || values.some((v) => !Number.isSafeInteger(v))) {
    throw new Error(`must be integers split by commas (got ${JSON.stringify(text)})`);
  }
  return values;
}

function numberOf(text: string): number | undefined {
  const trimmed = text.trim();
  if (trimmed === '') return undefined;
  const number = Number(trimmed);
  return Number.isFinite(number) ? number : undefined;
}

function invalid(message: string): KilnError {
  return new KilnError(KilnErrorCode.InvalidConfig, `serving.properties ${message}`);
}
