/**
 * Which LibTorch addon the kit runs and whether it reaches the device: loads the PyTorch
 * engine and prints one line (LibTorch version, CUDA compiled and available, devices); exits
 * 1 with the reason when `DEVICE` is not among the engine's devices.
 *
 *   node -C @kiln/source --import tsx bench/gpu/probe.ts DEVICE
 */
import { formatDevice, parseDevice } from '@kiln/core';
import { createLibTorchEngine } from '@kiln/engine-libtorch';

const wanted = parseDevice(process.argv[2] ?? 'cpu');
const engine = await createLibTorchEngine().load();
const info = engine.describe() as { cudaCompiled?: boolean; cudaAvailable?: boolean };
const devices = engine.devices();
console.log(
  `probe: LibTorch ${engine.version}, CUDA compiled ${String(info.cudaCompiled)}, ` +
    `available ${String(info.cudaAvailable)}; devices ${devices.map(formatDevice).join(', ')}`,
);
if (!devices.some((d) => d.type === wanted.type && d.id === wanted.id)) {
  console.error(
    `probe: ${formatDevice(wanted)} is not among the engine's devices` +
      (info.cudaCompiled ? '' : ': the addon was built against a CPU-only LibTorch'),
  );
  process.exit(1);
}
