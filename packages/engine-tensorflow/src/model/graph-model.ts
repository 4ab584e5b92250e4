import { fromTfjsDType, tfjsDTypeOfTfDataType } from '../convert/dtypes.js';
import type { TfApi, TfModelArtifacts, TfTensor } from '../runtime/tfjs-api.js';
import {
  AsyncExecutionRequired,
  type TfLoadedModel,
  type TfTensorSpec,
  namedFeeds,
  tensorList,
  tensorSpec,
} from './loaded-model.js';

type GraphModel = Awaited<ReturnType<TfApi['loadGraphModel']>>;

/** A TensorShapeProto as JSON: dims carry sizes as strings or numbers; -1 is unknown. */
interface TensorShapeJson {
  readonly dim?: readonly { readonly size?: string | number }[];
  readonly unknownRank?: boolean;
}

interface SignatureEntryJson {
  readonly name?: string;
  readonly dtype?: string;
  readonly tensorShape?: TensorShapeJson;
}

interface NodeJson {
  readonly name: string;
  readonly attr?: Readonly<Record<string, { type?: string; list?: { shape?: TensorShapeJson[] } }>>;
}

/** Attributes that hold an op's output type, in the order ops commonly use them. */
const OUTPUT_TYPE_ATTRS = ['T', 'dtype', 'DstT', 'out_type', 'output_type', 'Tout'];

/**
 * A TF.js graph model (tensorflowjs_converter's output). Inputs and outputs are named by the
 * signature's keys when the model has a signature, else by graph node names.
 */
export async function loadGraphModel(
  tf: TfApi,
  file: string,
  artifacts: TfModelArtifacts,
): Promise<TfLoadedModel> {
  const model = await tf.loadGraphModel({ load: () => Promise.resolve(artifacts) });
  const inputs = model.inputNodes.map((name, i) => {
    const info = model.inputs[i]!;
    return tensorSpec(name, fromTfjsDType(info.dtype, `input ${name}`), info.shape);
  });
  const outputs = model.outputNodes.map((name) => outputSpec(name, artifacts));
  return new GraphModelAdapter(model, inputs, outputs, {
    format: 'graph-model',
    file,
    signature: artifacts.signature === undefined ? 'none' : 'from model.json',
    generatedBy: artifacts.generatedBy,
    convertedBy: artifacts.convertedBy,
  });
}

class GraphModelAdapter implements TfLoadedModel {
  readonly format = 'graph-model';
  asynchronous = false;
  private readonly outputNames: string[];

  constructor(
    private readonly model: GraphModel,
    readonly inputs: readonly TfTensorSpec[],
    readonly outputs: readonly TfTensorSpec[],
    readonly facts: Readonly<Record<string, unknown>>,
  ) {
    this.outputNames = outputs.map((o) => o.name);
  }

  executeSync(feeds: readonly TfTensor[]): TfTensor[] {
    try {
      return tensorList(this.model.execute(namedFeeds(this.inputs, feeds), this.outputNames));
    } catch (error) {
      // tfjs names executeAsync in both of its "this graph is dynamic" errors.
      if (error instanceof Error && error.message.includes('executeAsync')) {
        this.asynchronous = true;
        throw new AsyncExecutionRequired();
      }
      throw error;
    }
  }

  async executeAsync(feeds: readonly TfTensor[]): Promise<TfTensor[]> {
    return tensorList(
      await this.model.executeAsync(namedFeeds(this.inputs, feeds), this.outputNames),
    );
  }

  dispose(): void {
    this.model.dispose();
  }
}

/** An output's dtype and shape: from the signature, else from its graph node's attributes. */
function outputSpec(name: string, artifacts: TfModelArtifacts): TfTensorSpec {
  const signature = (
    artifacts.signature as { outputs?: Record<string, SignatureEntryJson> } | undefined
  )?.outputs;
  const entry = signature?.[name];
  if (entry !== undefined) {
    return tensorSpec(
      name,
      fromTfjsDType(tfjsDTypeOfTfDataType(entry.dtype), `output ${name}`),
      dims(entry.tensorShape),
    );
  }
  const [nodeName, index] = name.split(':');
  const nodes = (artifacts.modelTopology as { node?: NodeJson[] } | undefined)?.node ?? [];
  const attr = nodes.find((n) => n.name === nodeName)?.attr ?? {};
  const type = OUTPUT_TYPE_ATTRS.map((key) => attr[key]?.type).find((t) => t !== undefined);
  // Without a signature or a typed attribute the type shows only when the graph runs; tfjs's
  // default dtype is the honest guess, and every forward reports the real one.
  const dtype =
    type === undefined ? undefined : fromTfjsDType(tfjsDTypeOfTfDataType(type), `output ${name}`);
  return tensorSpec(name, dtype, dims(attr._output_shapes?.list?.shape?.[Number(index ?? 0)]));
}

function dims(shape: TensorShapeJson | undefined): number[] | undefined {
  if (shape === undefined || shape.unknownRank === true) return undefined;
  // A dim without a size is read as unknown (tfjs itself would read NaN).
  return (shape.dim ?? []).map((d) => (d.size === undefined ? -1 : Number(d.size)));
}
