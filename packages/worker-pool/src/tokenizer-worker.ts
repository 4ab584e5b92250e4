// Entry of a tokenizer thread: a generation pool's tokenizer (and chat template), so that
// encoding a long prompt never holds the server's event loop.
import { parentPort, workerData } from 'node:worker_threads';
import {
  ChatTemplate,
  type GenerationDefaults,
  KilnError,
  KilnErrorCode,
  type TextTokenizer,
  checkResponseFormat,
  loadTextTokenizer,
  readGenerationDefaults,
} from '@kiln/core';
import type {
  TokenizerReply,
  TokenizerRequest,
  TokenizerWorkerData,
} from './tokenizer-protocol.js';

const port = parentPort!;
const { dir } = workerData as TokenizerWorkerData;
const reply = (message: TokenizerReply, transfer: ArrayBuffer[] = []) =>
  port.postMessage(message, transfer);

let loaded:
  | { tokenizer: TextTokenizer; template: ChatTemplate | undefined; defaults: GenerationDefaults }
  | undefined;
try {
  loaded = {
    tokenizer: await loadTextTokenizer(dir),
    template: await ChatTemplate.fromFolder(dir),
    defaults: await readGenerationDefaults(dir),
  };
} catch (error) {
  // The owner terminates this thread when it reads the failure.
  reply({
    type: 'start-failed',
    error: KilnError.wrap(error, KilnErrorCode.ModelLoadFailed).toJSON(),
  });
}

/** A request's prompt tokens: its text, or its messages as the chat template writes them. */
async function promptTokens(request: TokenizerRequest): Promise<number[]> {
  const { tokenizer, template } = loaded!;
  if (request.type === 'encode') return tokenizer.encode(request.text);
  if (request.type === 'check-format') {
    // Compiled here, without the vocabulary, so that a bad schema never reaches a step worker.
    await checkResponseFormat(request.format);
    return [];
  }
  if (!template) throw new KilnError(KilnErrorCode.InvalidInput, 'the model has no chat template');
  const prompt = template.render(request.messages, {
    ...(request.tools ? { tools: request.tools } : {}),
  });
  // The template writes the special tokens it wants (a beginning-of-sequence one, say).
  return tokenizer.encode(prompt, { addSpecialTokens: false });
}

if (loaded) {
  const { tokenizer, template, defaults } = loaded;
  port.on('message', async (request: TokenizerRequest) => {
    try {
      const tokens = Int32Array.from(await promptTokens(request));
      reply({ type: 'encoded', id: request.id, tokens }, [tokens.buffer]);
    } catch (error) {
      const failure = KilnError.wrap(error, KilnErrorCode.Internal).toJSON();
      reply({ type: 'failed', id: request.id, error: failure });
    }
  });
  const eosTokenIds = [
    ...new Set([
      ...(tokenizer.eosTokenId === undefined ? [] : [tokenizer.eosTokenId]),
      ...(tokenizer.eosTokenIds ?? []),
    ]),
  ];
  reply({
    type: 'ready',
    vocabSize: tokenizer.vocabSize,
    eosTokenId: tokenizer.eosTokenId,
    eosTokenIds,
    generationDefaults: defaults,
    chatTemplate: template && {
      ...(template.bosToken === undefined ? {} : { bosToken: template.bosToken }),
      ...(template.eosToken === undefined ? {} : { eosToken: template.eosToken }),
      usesTools: template.usesTools(),
    },
  });
}
