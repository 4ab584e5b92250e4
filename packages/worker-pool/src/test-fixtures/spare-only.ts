// A process that starts a spare host thread (one that would live 10 minutes) and does nothing
// else: it must end on its own.
import { prestartHostThread } from '../prestart.js';

process.stdout.write(String(prestartHostThread({ endAfterMs: 600_000 })));
