import fs from 'node:fs';
import path from 'node:path';
import {
  addMulModel,
  buildIrisDemo,
  identityModel,
  resnetModel,
  slowModel,
} from '@kiln/model-tools';

/** A model store with the models the HTTP tests serve, built once per test file. */
export interface ModelStore {
  readonly dir: string;
  readonly iris: string;
  readonly addMul: string;
  readonly fp16: string;
  readonly strings: string;
}

export async function buildModelStore(dir: string): Promise<ModelStore> {
  const iris = path.join(dir, 'iris');
  await buildIrisDemo(iris);
  const addMul = await addMulModel(path.join(dir, 'addmul'));
  fs.appendFileSync(path.join(addMul, 'serving.properties'), 'batch_size=4\nmax_batch_delay=5\n');
  const fp16 = await identityModel(path.join(dir, 'fp16'), 'float16');
  const strings = await identityModel(path.join(dir, 'strings'), 'string');
  return { dir, iris, addMul, fp16, strings };
}

/** An image classifier (ResNet-18 topology, random weights) served by the image translator. */
export async function buildImageModel(
  dir: string,
  classes = ['cat', 'dog', 'fish', 'bird', 'frog'],
): Promise<string> {
  await resnetModel(dir, { depth: 18, classes: classes.length });
  fs.writeFileSync(path.join(dir, 'synset.txt'), `${classes.join('\n')}\n`);
  fs.appendFileSync(
    path.join(dir, 'serving.properties'),
    'translatorFactory=image-classification\ntopK=3\n',
  );
  return dir;
}

/** A model taking about `ms` per run, for event-loop and overload tests. */
export async function buildSlowModel(dir: string, ms: number, properties = ''): Promise<string> {
  const { dir: folder } = await slowModel(dir, ms);
  if (properties) fs.appendFileSync(path.join(folder, 'serving.properties'), properties);
  return folder;
}
