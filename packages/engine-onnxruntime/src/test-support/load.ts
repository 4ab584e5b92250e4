import { CPU, servingPropertiesFrom } from '@kiln/core';
import { OrtModel, type OrtModelSettings } from '../ort-model.js';

/** Loads a model folder the way Kiln's loader would, with `option.*` values given directly. */
export function loadOrtModel(
  modelDir: string,
  options: Record<string, string> = {},
  settings: OrtModelSettings = {},
): Promise<OrtModel> {
  return OrtModel.load(
    { name: 'model', modelDir, device: CPU, options, properties: servingPropertiesFrom({}) },
    settings,
  );
}
