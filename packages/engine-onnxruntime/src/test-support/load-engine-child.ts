// Run as a child process by a test: loads the engine and prints the outcome as JSON.
import { EngineRegistry } from '@kiln/core';
import { provider } from '../provider.js';

const registry = new EngineRegistry({});
registry.register(provider);
try {
  const engine = await registry.get('OnnxRuntime');
  console.log(JSON.stringify({ ok: true, version: engine.version }));
} catch (error) {
  const { code, message } = error as { code?: string; message: string };
  console.log(JSON.stringify({ ok: false, code, message }));
}
