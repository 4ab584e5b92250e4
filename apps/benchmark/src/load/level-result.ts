import type { LevelResult } from '../results.js';
import type { LevelMeasurement } from './measure-level.js';

/** A measured level as reports show it, with the server's split when it was read. */
export function levelResult(
  measured: LevelMeasurement,
  server: LevelResult['server'],
): LevelResult {
  return {
    level: measured.level,
    throughput: measured.throughput,
    requests: measured.requests,
    errors: measured.errors,
    latency: measured.latency,
    stable: measured.stable,
    windows: measured.windows,
    server,
    firstError: measured.firstError,
  };
}
