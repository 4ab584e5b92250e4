import { type Device, OptionReader, type SettingDeclaration } from '@kiln/core';

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
export const DLR_OPTIONS: readonly SettingDeclaration[] = [
  { key: 'numThreads', type: 'integer', min: 1, default: 'per context', doc: 'predictor threads' },
  {
    key: 'deviceType',
    type: 'string',
    default: "the model's device",
    doc: `${Object.keys(DEVICE_TYPES).join(', ')}, or a DLPack number`,
  },
  {
    key: 'deviceId',
    type: 'integer',
    min: 0,
    max: 1024,
    default: "the model's device",
    doc: 'device index',
  },
];

/** The names of DLR_OPTIONS. */
export const DLR_OPTION_KEYS: readonly string[] = DLR_OPTIONS.map((d) => d.key);

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
  const o = new OptionReader(options, DLR_OPTIONS);
  const typeText = o.string('deviceType');
  return {
    deviceType:
      typeText === undefined ? (device.type === 'cpu' ? 1 : 2) : parseDeviceType(o, typeText),
    deviceId: o.integer('deviceId') ?? device.id,
    numThreads: o.integer('numThreads'),
  };
}

/** A DLPack device type's name, for messages. */
export function deviceTypeName(type: number): string {
  if (type === 2) return 'cuda';
  return (
    Object.entries(DEVICE_TYPES).find(([, code]) => code === type)?.[0] ?? `device type ${type}`
  );
}

function parseDeviceType(o: OptionReader, text: string): number {
  const value = text.toLowerCase();
  if (Object.hasOwn(DEVICE_TYPES, value)) return DEVICE_TYPES[value]!;
  if (/^\d+$/.test(value)) return o.integer('deviceType', { min: 1, max: 64 })!;
  throw o.invalid(
    'deviceType',
    `is not a device (use ${Object.keys(DEVICE_TYPES).join(', ')} or a DLPack number)`,
  );
}
