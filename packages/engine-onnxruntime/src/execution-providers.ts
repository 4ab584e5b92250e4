import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { OrtModule } from './ort-loader.js';
import { ortBinaryDir } from './ort-loader.js';
import type { OrtDevice } from './options.js';

function providerLibrary(name: 'cuda' | 'tensorrt'): string {
  return process.platform === 'win32'
    ? `onnxruntime_providers_${name}.dll`
    : `libonnxruntime_providers_${name}.so`;
}

/**
 * Why an execution provider cannot run here, or undefined when it can be tried.
 * onnxruntime-node ships CPU in the package; CUDA and TensorRT need provider libraries that
 * its installer downloads (skipped with ONNXRUNTIME_NODE_INSTALL=skip) plus CUDA itself.
 */
export function providerProblem(ort: OrtModule, device: OrtDevice): string | undefined {
  if (device === 'cpu') return undefined;
  const listed = ort.listSupportedBackends().some((b) => b.name === device);
  if (!listed)
    return `this onnxruntime-node build for ${process.platform}-${process.arch} has no ${device} execution provider`;
  const dir = ortBinaryDir();
  const needed = device === 'tensorrt' ? (['cuda', 'tensorrt'] as const) : (['cuda'] as const);
  const missing = needed
    .map(providerLibrary)
    .filter((file) => !dir || !existsSync(join(dir, file)));
  if (missing.length === 0) return undefined;
  return (
    `the ${device} execution provider is not installed (${missing.join(', ')} not found in ${dir ?? 'the onnxruntime-node package'}). ` +
    'Reinstall onnxruntime-node without ONNXRUNTIME_NODE_INSTALL=skip on a machine with CUDA 12, or use option.ortDevice=cpu'
  );
}
