/** What a setting's value is; readers parse it by this, reports show it. */
export type SettingType = 'string' | 'integer' | 'number' | 'boolean' | 'choice' | 'list' | 'file';

/**
 * One setting, declared once: serving.properties keys, an engine's `option.*` keys, a
 * translator's arguments, config.properties keys. Readers take ranges and choices from here,
 * and the settings check warns about keys that match no declaration.
 */
export interface SettingDeclaration {
  /** As written in the file, without `option.` for an engine's options. */
  readonly key: string;
  readonly type: SettingType;
  /** Smallest value of an integer or number. */
  readonly min?: number;
  /** Largest value of an integer or number. */
  readonly max?: number;
  /** The values a `choice` accepts (compared without case). */
  readonly values?: readonly string[];
  /** What is in force when the key is left out, in words when it depends (`every core`). */
  readonly default?: string;
  readonly doc: string;
  /**
   * Set for keys DJL Serving or TorchServe define that Kiln does not implement: such a key is
   * a warning saying so (and why), never silently dropped, and Kiln ignores it.
   */
  readonly unsupported?: string;
  /**
   * Why Kiln cannot honour this value, or undefined when it can. A reason fails the model's
   * load: it must name no absolute server path, since it reaches HTTP clients.
   */
  readonly refuse?: (value: string, context: SettingContext) => string | undefined;
}

/** What a value check may need to know. */
export interface SettingContext {
  /** The model's folder (where relative file names resolve). */
  readonly modelDir?: string;
}

/** The declarations of one group of settings, by key. */
export function declarationsByKey(
  declarations: readonly SettingDeclaration[],
): ReadonlyMap<string, SettingDeclaration> {
  return new Map(declarations.map((d) => [d.key, d]));
}

/**
 * The known key an unknown one most likely misspells (same letters ignoring case and
 * punctuation, else the fewest edits, at most a quarter of its length and never over 4), or
 * undefined when none is close.
 */
export function closestKey(key: string, known: Iterable<string>): string | undefined {
  const squash = (text: string) => text.toLowerCase().replace(/[^a-z0-9]/g, '');
  const candidates = [...known];
  const same = candidates.find((k) => squash(k) === squash(key));
  if (same !== undefined) return same;
  const limit = Math.min(4, Math.max(2, Math.floor(key.length / 4)));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of candidates) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance: insertions, deletions and substitutions. */
export function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(above + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}
