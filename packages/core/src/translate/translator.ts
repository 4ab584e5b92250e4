import type { SettingDeclaration } from '../settings/setting-declaration.js';
import type { Model } from '../model/model.js';
import type { NDList } from '../tensor/ndlist.js';
import type { Batchifier } from './batchifier.js';

/** Per-model context handed to a translator: the model and a place for prepared state. */
export interface TranslatorContext {
  readonly model: Model;
  /** serving.properties values (e.g. `topK`, `width`), for translator arguments. */
  readonly arguments: Readonly<Record<string, string>>;
}

/**
 * Converts a user input into tensors and the model's tensors into a user output (DJL's
 * Translator). Translators are stateless per call and may run on worker threads.
 */
export interface Translator<I, O> {
  /** How inputs of this translator batch; null means every input runs on its own. */
  readonly batchifier: Batchifier | null;
  /** One-time setup (read labels, build lookup tables). */
  prepare?(ctx: TranslatorContext): Promise<void> | void;
  processInput(ctx: TranslatorContext, input: I): Promise<NDList> | NDList;
  processOutput(ctx: TranslatorContext, output: NDList, input: I): Promise<O> | O;
}

export interface TranslatorFactory<I = unknown, O = unknown> {
  readonly name: string;
  /**
   * The serving.properties keys it reads as arguments. Declared, other keys are warnings
   * naming the closest one; undeclared (plugins), any key may be an argument.
   */
  readonly arguments?: readonly SettingDeclaration[];
  newInstance(
    model: Model,
    args: Readonly<Record<string, string>>,
  ): Promise<Translator<I, O>> | Translator<I, O>;
}
