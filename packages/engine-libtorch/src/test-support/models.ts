// TorchScript models for this package's tests, written with saveScriptModule (no Python).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CPU, type Engine, type Model, Tensor, servingPropertiesFrom } from '@kiln/core';
import { seededRandom } from '@kiln/testing';
import { type ScriptModuleSpec, saveScriptModule } from '../script-module.js';

/** A model folder: model.pt plus serving.properties holding `options` as option.* keys. */
export async function modelFolder(
  root: string,
  label: string,
  spec: ScriptModuleSpec,
  options: Readonly<Record<string, string>> = {},
): Promise<string> {
  const dir = await mkdtemp(join(root, `${label}-`));
  await saveScriptModule(join(dir, 'model.pt'), spec);
  const lines = ['engine=PyTorch', ...Object.entries(options).map(([k, v]) => `option.${k}=${v}`)];
  await writeFile(join(dir, 'serving.properties'), `${lines.join('\n')}\n`);
  return dir;
}

/** Loads a folder the way the server does: its serving.properties options, on the CPU. */
export async function loadFolder(
  engine: Engine,
  dir: string,
  options: Readonly<Record<string, string>> = {},
): Promise<Model> {
  const raw: Record<string, string> = { engine: 'PyTorch' };
  for (const [k, v] of Object.entries(options)) raw[`option.${k}`] = v;
  const properties = servingPropertiesFrom(raw);
  return engine.loadModel({
    name: 'test',
    modelDir: dir,
    device: CPU,
    options: properties.options,
    properties,
  });
}

export function randomTensor(shape: number[], seed: number, name?: string): Tensor<'float32'> {
  const random = seededRandom(seed);
  const size = shape.reduce((a, b) => a * b, 1);
  return new Tensor(
    'float32',
    Float32Array.from({ length: size }, () => random() - 0.5),
    shape,
    name,
  );
}

/** A small CNN layer: conv 3→8 (3×3) with bias, then relu. */
export function convSpec(): ScriptModuleSpec {
  return {
    source: `
def forward(self, x: Tensor) -> Tensor:
    return torch.relu(torch.conv2d(x, self.weight, self.bias))
`,
    parameters: { weight: randomTensor([8, 3, 3, 3], 1), bias: randomTensor([8], 2) },
  };
}

/** Enough matrix work (about 10 ms) that two forwards in flight visibly overlap. */
export function slowSpec(): ScriptModuleSpec {
  return {
    source: `
def forward(self, x: Tensor) -> Tensor:
    for _ in range(20):
        x = torch.tanh(torch.matmul(x, self.weight))
    return x
`,
    parameters: { weight: randomTensor([192, 192], 3) },
  };
}
