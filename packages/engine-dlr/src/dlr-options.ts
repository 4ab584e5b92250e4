import { type Device, KilnError, KilnErrorCode } from '@kiln/core';

/** DLPack device types by name (dlpack.h's DLDeviceType), as DLR's CreateDLRModel takes them. */
export const DEVICE_TYPES: Readonly<Record<string, number>> = {
  cpu: 1,
  gpu: 2,
  cuda: 2,
  opencl: 4,
  vulkan: 7,
  metal: 8,
  rocm: 10,
};

/** The `option.*` keys of serving.properties this engine reads. */
export const DLR_OPTION_KEYS = ['numThreads', 'deviceType', 'deviceId'] as const;

export interface DlrModelOptions {
  /** DLPack device type handed to CreateDLRModel. */
  readonly deviceType: number;
  readonly deviceId: number;
  /** Threads of each predictor (TVM_NUM_THREADS through SetDLRNumThreads), when set. */
  readonly numThreads: number | undefined;
}

/**
 * Reads `option.numThreads`, `option.deviceType` (cpu, gpu/cuda, opencl, vulkan, metal, rocm or
 * a DLPack number) and `option.deviceId`; the device defaults to the one Kiln loads the model
 * on. Throws INVALID_CONFIG naming the bad key.
 */
export function parseDlrOptions(
  options: Readonly<Record<string, string>>,
  device: Device,
): DlrModelOptions {
  const deviceType =
    options.deviceType === undefined
      ? device.type === 'cpu'
        ? 1
        : 2
      : parseDeviceType(options.deviceType);
  return {
    deviceType,
    deviceId:
      options.deviceId === undefined ? device.id : integer('deviceId', options.deviceId, 0, 1024),
    numThreads:
      options.numThreads === undefined
        ? undefined
        : integer('numThreads', options.numThreads, 1, 4096),
  };
}

/** A DLPack device type's name, for messages. */
export function deviceTypeName(type: number): string {
  if (type === 2) return 'cuda';
  return (
    Object.entries(DEVICE_TYPES).find(([, code]) => code === type)?.[0] ?? `device type ${type}`
  );
}

function parseDeviceType(text: string): number {
  const value = text.trim().toLowerCase();
  if (Object.hasOwn(DEVICE_TYPES, value)) return DEVICE_TYPES[value]!;
  if (/^\d+$/.test(value)) return integer('deviceType', value, 1, 64);
  throw new KilnError(
    KilnErrorCode.InvalidConfig,
    `option.deviceType ${JSON.stringify(text)} is not a device (use ${Object.keys(DEVICE_TYPES).join(', ')} or a DLPack number)`,
  );
}

function integer(key: string, text: string, low: number, high: number): number {
  const value = Number(text.trim());
  if (!/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(value) || value < low || value > high) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `option.${key} must be an integer within ${low}..${high}, got ${JSON.stringify(text)}`,
    );
  }
  return value;
}
