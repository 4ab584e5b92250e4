import { KilnError, KilnErrorCode } from '@kiln/core';

/** Which malloc the launcher loads into workers (TorchServe's allocator flags). */
export type LauncherAllocator = 'jemalloc' | 'tcmalloc' | 'default';

/**
 * TorchServe's `cpu_launcher_enable` and `cpu_launcher_args`, read into one value. Every field
 * applies only where `enabled` is true, as in TorchServe, whose launcher is not run otherwise;
 * the flags are still checked when it is off, so a typo is never silently kept.
 */
export interface CpuLauncher {
  /** `cpu_launcher_enable`: pin each model's workers to their own cores. */
  readonly enabled: boolean;
  /** `--use_logical_core`: hyperthread siblings count as cores (physical cores only otherwise). */
  readonly useLogicalCores: boolean;
  /**
   * `--ninstances N`: the chosen cores are split into N equal sets, worker i taking set i mod N
   * (unset: one set per worker, the model's max_workers).
   */
  readonly instances: number | undefined;
  /** `--node_id N`: only the cores of NUMA node N (unset: every node). */
  readonly nodeId: number | undefined;
  /**
   * `--disable_numactl`: TorchServe then pins with taskset instead of numactl. Kiln never runs
   * numactl — it pins with sched_setaffinity, and pinned threads allocate on their own node by
   * Linux's default policy — so the flag is accepted and changes nothing.
   */
  readonly disableNumactl: boolean;
  /** `--enable_jemalloc` / `--enable_tcmalloc` / `--use_default_allocator` (default: glibc's). */
  readonly allocator: LauncherAllocator;
  /** The flags as given, for messages. */
  readonly args: string;
}

export const CPU_LAUNCHER_OFF: CpuLauncher = {
  enabled: false,
  useLogicalCores: false,
  instances: undefined,
  nodeId: undefined,
  disableNumactl: false,
  allocator: 'default',
  args: '',
};

const SWITCHES = ['--use_logical_core', '--disable_numactl'] as const;
const ALLOCATORS: Readonly<Record<string, LauncherAllocator>> = {
  '--enable_jemalloc': 'jemalloc',
  '--enable_tcmalloc': 'tcmalloc',
  '--use_default_allocator': 'default',
};
const NUMBERS = { '--ninstances': 1, '--node_id': 0 } as const;

/**
 * Reads `cpu_launcher_enable` (true / false) and `cpu_launcher_args` (TorchServe's flags,
 * space-separated; `--flag=value` is taken too). An unknown flag, a missing or bad number and
 * two allocators at once are INVALID_CONFIG errors naming the flag.
 */
export function parseCpuLauncher(enable: string, args: string): CpuLauncher {
  const fail = (why: string) =>
    new KilnError(KilnErrorCode.InvalidConfig, `cpu_launcher_args=${args.trim()}: ${why}`);
  const switchValue = enable.trim().toLowerCase();
  if (switchValue !== 'true' && switchValue !== 'false' && switchValue !== '') {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `cpu_launcher_enable=${enable} must be true or false`,
    );
  }
  const tokens = args
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .flatMap((token) =>
      token.startsWith('--') && token.includes('=') ? token.split('=', 2) : [token],
    );
  let useLogicalCores = false;
  let disableNumactl = false;
  let allocatorFlag: string | undefined;
  const numbers: Partial<Record<keyof typeof NUMBERS, number>> = {};
  for (let i = 0; i < tokens.length; i++) {
    const flag = tokens[i]!;
    if (flag === '--use_logical_core') useLogicalCores = true;
    else if (flag === '--disable_numactl') disableNumactl = true;
    else if (flag in ALLOCATORS) {
      if (allocatorFlag !== undefined && allocatorFlag !== flag)
        throw fail(`${allocatorFlag} and ${flag} both choose the allocator: keep one`);
      allocatorFlag = flag;
    } else if (flag in NUMBERS) {
      const name = flag as keyof typeof NUMBERS;
      const text = tokens[++i];
      const value = Number(text);
      if (text === undefined || text.startsWith('--') || !Number.isSafeInteger(value))
        throw fail(`${flag} needs an integer`);
      if (value < NUMBERS[name]) throw fail(`${flag} ${text} must be ≥ ${NUMBERS[name]}`);
      numbers[name] = value;
    } else {
      const known = [...SWITCHES, ...Object.keys(ALLOCATORS), ...Object.keys(NUMBERS)];
      throw fail(`unknown flag ${flag} (Kiln takes ${known.join(', ')})`);
    }
  }
  return {
    enabled: switchValue === 'true',
    useLogicalCores,
    instances: numbers['--ninstances'],
    nodeId: numbers['--node_id'],
    disableNumactl,
    allocator: allocatorFlag ? ALLOCATORS[allocatorFlag]! : 'default',
    args: args.trim(),
  };
}
