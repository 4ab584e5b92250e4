// Translator of the Iris demo model, named by `translatorFactory=translator.mjs` in its
// serving.properties. Plain JavaScript that imports nothing from Kiln: Kiln hands it its
// classes (the plugin kit) as the third argument of newInstance, so the model folder works
// wherever it is copied.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

const FEATURES = 4;
/** Rows one request may carry; a larger body is refused rather than allocated. */
const MAX_ROWS = 1024;
const USAGE =
  'send JSON: [sepal length, sepal width, petal length, petal width] in cm, a list of such rows, or {"features": ...}';

/** Rows of the request and whether it was one flat row (answered with one list, not a list of lists). */
function parseRows(input, kit) {
  const invalid = (message) => new kit.KilnError(kit.KilnErrorCode.InvalidInput, message);
  let value;
  if (input.tensors && input.tensors.length > 0) {
    const tensor = input.tensors.get(0);
    const flat = Array.from(tensor.data, Number);
    const rows = [];
    for (let i = 0; i < flat.length; i += FEATURES) rows.push(flat.slice(i, i + FEATURES));
    value = tensor.rank === 1 ? rows[0] : rows;
  } else {
    try {
      value = JSON.parse(new TextDecoder().decode(input.body ?? new Uint8Array()));
    } catch {
      throw invalid(`the body is not JSON; ${USAGE}`);
    }
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) value = value.features;
  if (!Array.isArray(value) || value.length === 0) throw invalid(`no features found; ${USAGE}`);
  const single = !Array.isArray(value[0]);
  const rows = single ? [value] : value;
  if (rows.length > MAX_ROWS)
    throw invalid(`at most ${MAX_ROWS} rows per request, got ${rows.length}`);
  rows.forEach((row, i) => {
    const ok =
      Array.isArray(row) &&
      row.length === FEATURES &&
      row.every((v) => typeof v === 'number' && Number.isFinite(v));
    if (!ok)
      throw invalid(
        `row ${i} must be ${FEATURES} finite numbers, got ${JSON.stringify(row).slice(0, 80)}`,
      );
  });
  return { rows, single };
}

export default {
  name: 'iris',
  async newInstance(model, _args, kit) {
    const synset = await readFile(join(model.modelDir, 'synset.txt'), 'utf8');
    const classes = synset
      .split('\n')
      .map((s) => s.trim())
      .filter(Boolean);
    const singleRow = new WeakMap();
    return {
      // Requests carry [rows, 4] tensors: the stack batchifier joins them for one forward.
      batchifier: new kit.StackBatchifier(),
      processInput(_ctx, input) {
        const { rows, single } = parseRows(input, kit);
        singleRow.set(input, single);
        const features = new kit.Tensor(
          'float32',
          Float32Array.from(rows.flat()),
          [rows.length, FEATURES],
          'features',
        );
        return new kit.NDList([features]);
      },
      processOutput(_ctx, output, input) {
        const probabilities = output.find('probabilities') ?? output.get(0);
        const ranked = [];
        for (let r = 0; r < probabilities.shape[0]; r++) {
          const row = classes.map((className, k) => ({
            className,
            probability: probabilities.data[r * classes.length + k],
          }));
          ranked.push(row.sort((a, b) => b.probability - a.probability));
        }
        return { type: 'json', value: singleRow.get(input) ? ranked[0] : ranked };
      },
    };
  },
};
