import { KilnError, KilnErrorCode } from '../errors.js';

export type DeviceType = 'cpu' | 'gpu';

/** Where a model runs. DJL spells them `cpu`, `gpu0`, `gpu1`… */
export interface Device {
  readonly type: DeviceType;
  readonly id: number;
}

export const CPU: Device = Object.freeze({ type: 'cpu', id: 0 });

export function parseDevice(text: string): Device {
  const match = /^(cpu|gpu|cuda)(?::?(\d+))?$/i.exec(text.trim());
  if (!match) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `unknown device ${JSON.stringify(text)} (use cpu, gpu0, gpu1…)`,
    );
  }
  const type = match[1]!.toLowerCase() === 'cpu' ? 'cpu' : 'gpu';
  return { type, id: match[2] === undefined ? 0 : Number(match[2]) };
}

export function formatDevice(device: Device): string {
  return device.type === 'cpu' ? 'cpu' : `gpu${device.id}`;
}
