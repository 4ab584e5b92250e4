export { attr, type Attribute } from './attributes.js';
export {
  GraphBuilder,
  DEFAULT_OPSET,
  type Dim,
  type ModelOptions,
  type NodeOptions,
  type OnnxModel,
} from './graph-builder.js';
export { saveOnnxModel, encodeOnnxModel, decodeOnnxModel } from './save-model.js';
export { writeModelFolder, MODEL_FILE } from './model-folder.js';
export { SeededRandom } from './random.js';
export type { InitializerData } from './tensor-proto.js';
export { addDenseLayers, type DenseLayer } from './dense-layers.js';
export { identityModel, addMulModel, affineModel, type AffineModel } from './conformance-models.js';
export { resnetModel, type ResnetModel, type ResnetOptions } from './resnet.js';
export { tinyModel } from './tiny-model.js';
export {
  slowModel,
  DEFAULT_MATMUL_512_MS,
  type SlowModel,
  type SlowModelOptions,
} from './slow-model.js';
export { mlpModel, type MlpModel, type MlpOptions } from './mlp-model.js';
export {
  transformerEncoderModel,
  type TransformerEncoderModel,
  type TransformerEncoderOptions,
} from './transformer-encoder.js';
export { buildIrisDemo, type IrisDemo, type IrisDemoOptions } from './iris-demo/iris-demo.js';
export { irisData, type IrisData } from './iris-demo/iris-data.js';
export { runCli } from './cli-commands.js';
export {
  gptDecoderModel,
  defaultCharVocab,
  CHAR_VOCAB_FILE,
  END_OF_TEXT,
  type GptDecoderModel,
  type GptDecoderOptions,
} from './gpt-decoder.js';
export {
  trainTinyGpt,
  writeTinyGpt,
  tinyGptUnavailable,
  pythonTorchUnavailable,
  kjvTextUnavailable,
  TINY_GPT_SCRIPT,
  TINY_GPT_PYTHON,
  KJV_PROGRAM,
  KJV_DATA,
  type TinyGptOptions,
  type TinyGptTraining,
  type TinyGptModel,
} from './tiny-gpt.js';
export {
  llamaDecoderModel,
  moveToExternalData,
  LLAMA_DECODER_SCRIPT,
  LLAMA_MODEL_FILE,
  type LlamaDecoderModel,
  type LlamaDecoderOptions,
} from './llama-decoder.js';
export {
  byteBpeTokenizerJson,
  gpt2ByteCharacters,
  writeByteBpeTokenizer,
  BYTE_BPE_END_OF_TEXT,
  BYTE_BPE_END_OF_TEXT_ID,
} from './byte-bpe-tokenizer.js';
export {
  gpt2DecoderModel,
  GPT2_DECODER_SCRIPT,
  type Gpt2DecoderModel,
  type Gpt2DecoderOptions,
} from './gpt2-decoder.js';
export {
  sentencePieceTokenizerJson,
  sentencePieceTokenizerConfig,
  SENTENCEPIECE_SPACE,
  SENTENCEPIECE_UNK,
  SENTENCEPIECE_BOS,
  SENTENCEPIECE_EOS,
  SENTENCEPIECE_BOS_ID,
  SENTENCEPIECE_EOS_ID,
  SENTENCEPIECE_CHAT_TEMPLATE,
} from './sentencepiece-tokenizer.js';
export { trainWordBpe } from './word-bpe-trainer.js';
export { readKjvText } from './kjv-text.js';
export { float16IoModel } from './float16-io.js';
