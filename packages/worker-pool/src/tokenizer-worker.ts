// Entry of a tokenizer thread: a generation pool's tokenizer, so that encoding a long prompt
// never holds the server's event loop.
import { parentPort, workerData } from 'node:worker_threads';
import { KilnError, KilnErrorCode, type TextTokenizer, loadTextTokenizer } from '@kiln/core';
import type {
  TokenizerReply,
  TokenizerRequest,
  TokenizerWorkerData,
} from './tokenizer-protocol.js';

const port = parentPort!;
const { dir } = workerData as TokenizerWorkerData;
const reply = (message: TokenizerReply, transfer: ArrayBuffer[] = []) =>
  port.postMessage(message, transfer);

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
  port.on('message', (request: TokenizerRequest) => {
    try {
      const tokens = Int32Array.from(loaded.encode(request.text));
      reply({ type: 'encoded', id: request.id, tokens }, [tokens.buffer]);
    } catch (error) {
      const failure = KilnError.wrap(error, KilnErrorCode.Internal).toJSON();
      reply({ type: 'failed', id: request.id, error: failure });
    }
  });
  reply({ type: 'ready', vocabSize: loaded.vocabSize, eosTokenId: loaded.eosTokenId });
}
