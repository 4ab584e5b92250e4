import { OptionReader, type SettingDeclaration } from '@kiln/core';

/** serving.properties `option.modelName` (DJL's): the model file's name when it differs from the folder's. */
export const MODEL_NAME_OPTION = 'modelName';
/** serving.properties `option.tags`: the MetaGraph to load, comma-separated (default `serve`). */
export const SAVED_MODEL_TAGS_OPTION = 'tags';
/** serving.properties `option.signature`: the SignatureDef to run (default `serving_default`). */
export const SAVED_MODEL_SIGNATURE_OPTION = 'signature';

export const DEFAULT_SAVED_MODEL_TAGS = ['serve'];
export const DEFAULT_SAVED_MODEL_SIGNATURE = 'serving_default';

/** The `option.*` keys this engine reads. */
export const TF_OPTIONS: readonly SettingDeclaration[] = [
  {
    key: MODEL_NAME_OPTION,
    type: 'string',
    doc: "the model file's name when it is not the folder's",
  },
  {
    key: SAVED_MODEL_TAGS_OPTION,
    type: 'list',
    default: DEFAULT_SAVED_MODEL_TAGS.join(','),
    doc: "the SavedModel MetaGraph's tags, comma-separated",
  },
  {
    key: SAVED_MODEL_SIGNATURE_OPTION,
    type: 'string',
    default: DEFAULT_SAVED_MODEL_SIGNATURE,
    doc: 'the SignatureDef to run',
  },
];

/** The `option.*` values this engine reads. */
export interface TfModelOptions {
  readonly modelName: string | undefined;
  /** The SavedModel MetaGraph's tags. */
  readonly tags: readonly string[];
  /** The SavedModel SignatureDef to run. */
  readonly signature: string;
}

/** Reads `option.modelName`, `option.tags` and `option.signature` (prefix removed). */
export function readTfModelOptions(options: Readonly<Record<string, string>>): TfModelOptions {
  const o = new OptionReader(options, TF_OPTIONS);
  return {
    modelName: o.string(MODEL_NAME_OPTION),
    tags: (o.string(SAVED_MODEL_TAGS_OPTION) ?? DEFAULT_SAVED_MODEL_TAGS.join(','))
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean),
    signature: o.string(SAVED_MODEL_SIGNATURE_OPTION) ?? DEFAULT_SAVED_MODEL_SIGNATURE,
  };
}
