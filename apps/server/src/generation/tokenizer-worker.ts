// Entry of a tokenizer thread: a generative model's tokenizer, so that encoding a long prompt
// and decoding generated tokens never hold the server's event loop.
import { parentPort, workerData } from 'node:worker_threads';
import {
  KilnError,
  KilnErrorCode,
  type TextTokenizer,
  TokenTextStream,
  loadTextTokenizer,
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
const serialize = (error: unknown) => KilnError.wrap(error, KilnErrorCode.Internal).toJSON();

let tokenizer: TextTokenizer | undefined;
try {
  tokenizer = await loadTextTokenizer(dir);
} catch (error) {
  // The owner terminates this thread when it reads the failure.
  reply({
    type: 'start-failed',
    error: KilnError.wrap(error, KilnErrorCode.ModelLoadFailed).toJSON(),
  });
}

if (tokenizer) {
  const loaded = tokenizer;
  /** One per generation: its tokens so far, decoded so that no UTF-8 character is split. */
  const streams = new Map<number, TokenTextStream>();
  port.on('message', (request: TokenizerRequest) => {
    switch (request.type) {
      case 'encode':
        try {
          const tokens = Int32Array.from(loaded.encode(request.text));
          reply({ type: 'encoded', id: request.id, tokens }, [tokens.buffer]);
        } catch (error) {
          reply({ type: 'failed', id: request.id, error: serialize(error) });
        }
        return;
      case 'decode':
        try {
          const texts = request.tokens.map(({ stream, token }) => {
            let text = streams.get(stream);
            if (!text) streams.set(stream, (text = new TokenTextStream(loaded)));
            return text.push(token);
          });
          reply({ type: 'decoded', id: request.id, texts });
        } catch (error) {
          reply({ type: 'failed', id: request.id, error: serialize(error) });
        }
        return;
      case 'end':
        streams.delete(request.stream);
        return;
    }
  });
  reply({ type: 'ready', vocabSize: loaded.vocabSize, eosTokenId: loaded.eosTokenId });
}
