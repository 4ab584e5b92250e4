import { attr } from './attributes.js';
import { GraphBuilder } from './graph-builder.js';
import { writeModelFolder } from './model-folder.js';
import { SeededRandom } from './random.js';

export interface ResnetOptions {
  /** 18 (basic blocks, 11.7 M parameters) or 50 (bottleneck blocks, 25.6 M). */
  readonly depth: 18 | 50;
  /** Output classes; 1000 like ImageNet by default. */
  readonly classes?: number;
  readonly seed?: number;
}

export interface ResnetModel {
  readonly dir: string;
  readonly inputName: string;
  readonly outputName: string;
  /** [batch, 3, 224, 224] with a dynamic batch. */
  readonly inputShape: readonly (number | string)[];
  readonly parameters: number;
}

const STAGE_WIDTHS = [64, 128, 256, 512];
const BLOCKS: Record<ResnetOptions['depth'], readonly number[]> = {
  18: [2, 2, 2, 2],
  50: [3, 4, 6, 3],
};

/**
 * A ResNet with torchvision's topology (v1.5: the stride sits on the 3×3 convolution):
 * 7×7 stem, max pool, four stages of residual blocks with BatchNormalization and ReLU,
 * global average pool and a Gemm classifier. Weights are seeded He-normal, so the model is
 * reproducible and its speed matches a trained one; its predictions mean nothing.
 */
export async function resnetModel(dir: string, options: ResnetOptions): Promise<ResnetModel> {
  const classes = options.classes ?? 1000;
  const builder = new ResnetBuilder(new SeededRandom(options.seed ?? options.depth));
  const g = builder.g;
  g.input('input', 'float32', ['batch', 3, 224, 224]);

  let x = builder.convBn('input', 3, 64, 7, 2, true);
  x = g.op('MaxPool', [x], {
    kernel_shape: attr.ints([3, 3]),
    strides: attr.ints([2, 2]),
    pads: attr.ints([1, 1, 1, 1]),
  });
  let channels = 64;
  BLOCKS[options.depth].forEach((count, stage) => {
    for (let i = 0; i < count; i++) {
      const stride = stage > 0 && i === 0 ? 2 : 1;
      const width = STAGE_WIDTHS[stage]!;
      const block =
        options.depth === 18
          ? builder.basicBlock(x, channels, width, stride)
          : builder.bottleneck(x, channels, width, stride);
      x = block.output;
      channels = block.channels;
    }
  });
  const pooled = g.op('Flatten', [g.op('GlobalAveragePool', [x])], { axis: attr.int(1) });
  const fcWeight = g.weight(
    'fc_weight',
    [classes, channels],
    builder.random.normalArray(classes * channels, 1 / Math.sqrt(channels)),
  );
  const fcBias = g.weight('fc_bias', [classes], new Float32Array(classes));
  g.op('Gemm', [pooled, fcWeight, fcBias], { transB: attr.int(1) }, { output: 'logits' });
  g.output('logits', 'float32', ['batch', classes]);

  await writeModelFolder(
    dir,
    g.toModel({ docString: `ResNet-${options.depth}, seeded random weights` }),
    {
      'option.optLevel': 'all',
    },
  );
  return {
    dir,
    inputName: 'input',
    outputName: 'logits',
    inputShape: ['batch', 3, 224, 224],
    parameters: builder.parameters + classes * channels + classes,
  };
}

class ResnetBuilder {
  readonly g = new GraphBuilder('resnet');
  parameters = 0;

  constructor(readonly random: SeededRandom) {}

  /** Conv (no bias) → BatchNormalization → optional ReLU. `gamma` scales the BN output. */
  convBn(
    x: string,
    inC: number,
    outC: number,
    kernel: number,
    stride: number,
    relu: boolean,
    gamma = 1,
  ): string {
    const fanIn = inC * kernel * kernel;
    const w = this.g.weight(
      'conv',
      [outC, inC, kernel, kernel],
      this.random.normalArray(outC * fanIn, Math.sqrt(2 / fanIn)),
    );
    const pad = Math.floor(kernel / 2);
    const conv = this.g.op('Conv', [x, w], {
      kernel_shape: attr.ints([kernel, kernel]),
      strides: attr.ints([stride, stride]),
      pads: attr.ints([pad, pad, pad, pad]),
    });
    const bn = this.g.op(
      'BatchNormalization',
      [
        conv,
        this.g.weight('bn_scale', [outC], this.random.uniformArray(outC, 0.8 * gamma, 1.2 * gamma)),
        this.g.weight('bn_bias', [outC], this.random.uniformArray(outC, -0.1, 0.1)),
        this.g.weight('bn_mean', [outC], this.random.uniformArray(outC, -0.1, 0.1)),
        this.g.weight('bn_var', [outC], this.random.uniformArray(outC, 0.8, 1.2)),
      ],
      { epsilon: attr.float(1e-5) },
    );
    this.parameters += outC * fanIn + 4 * outC;
    return relu ? this.g.op('Relu', [bn]) : bn;
  }

  basicBlock(
    x: string,
    inC: number,
    width: number,
    stride: number,
  ): { output: string; channels: number } {
    const a = this.convBn(x, inC, width, 3, stride, true);
    // A small last gamma keeps activations bounded through the residual sum, as trained ResNets do.
    const b = this.convBn(a, width, width, 3, 1, false, 0.3);
    return { output: this.residual(x, b, inC, width, stride), channels: width };
  }

  bottleneck(
    x: string,
    inC: number,
    width: number,
    stride: number,
  ): { output: string; channels: number } {
    const outC = width * 4;
    const a = this.convBn(x, inC, width, 1, 1, true);
    const b = this.convBn(a, width, width, 3, stride, true);
    const c = this.convBn(b, width, outC, 1, 1, false, 0.3);
    return { output: this.residual(x, c, inC, outC, stride), channels: outC };
  }

  private residual(x: string, branch: string, inC: number, outC: number, stride: number): string {
    const shortcut = stride !== 1 || inC !== outC ? this.convBn(x, inC, outC, 1, stride, false) : x;
    return this.g.op('Relu', [this.g.op('Add', [branch, shortcut])]);
  }
}
