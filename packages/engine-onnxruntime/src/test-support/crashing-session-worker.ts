// Stands in for a session worker whose thread dies mid-run (as a native crash or an
// out-of-memory kill would end it): it announces a session, then exits on the first run.
import { parentPort } from 'node:worker_threads';
import type { SessionReply } from '../worker-protocol.js';

const ready: SessionReply = {
  type: 'ready',
  inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 4] }],
  outputs: [],
};
parentPort!.postMessage(ready);
parentPort!.on('message', () => process.exit(3));
