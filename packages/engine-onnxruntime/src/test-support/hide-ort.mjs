// Preloaded (--import) by a test: makes onnxruntime-node unresolvable, as on a machine
// where it was never installed.
import { register } from 'node:module';

register('./hide-ort-hooks.mjs', import.meta.url);
