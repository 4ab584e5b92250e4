/** Engine options (`option.*` of serving.properties) that set intra-op threads by hand. */
export const THREAD_OPTION_KEYS = ['intraOpNumThreads', 'num_threads', 'numThreads'] as const;

/** How the pool divides the cores between workers and the engine threads each runs. */
export interface ThreadPlan {
  /** Intra-op threads to ask of each worker's engine; undefined leaves the user's setting. */
  readonly intraOpThreads: number | undefined;
  /** `OMP_NUM_THREADS` the process should get; undefined leaves the environment as it is. */
  readonly ompThreads: number | undefined;
  /** Why: `settings` (the pool's `threads`), `user` (an engine option or the environment) or `budget`. */
  readonly source: 'settings' | 'user' | 'budget';
  readonly cores: number;
  /** Workers the cores were divided between (every CPU group's maximum together). */
  readonly workers: number;
}

export interface ThreadPlanRequest {
  readonly cores: number;
  /** Most workers that may run on CPU at once. */
  readonly cpuWorkers: number;
  /** The pool's `threads` setting. */
  readonly threads?: number | undefined;
  /** The model's engine options. */
  readonly engineOptions?: Readonly<Record<string, string>>;
  /** `OMP_NUM_THREADS` as the user set it (see userOmpThreads). */
  readonly userOmpThreads?: string | undefined;
}

/**
 * Splits the cores so that workers × intra-op threads does not exceed them, unless the user
 * chose the threads: through the pool's `threads`, an engine option or `OMP_NUM_THREADS`
 * (which then sets every engine's intra-op threads, as it does OpenMP's).
 */
export function planThreads(request: ThreadPlanRequest): ThreadPlan {
  const { cores } = request;
  const workers = Math.max(1, request.cpuWorkers);
  const userOmp = request.userOmpThreads !== undefined;
  if (request.threads !== undefined) {
    return {
      intraOpThreads: request.threads,
      ompThreads: userOmp ? undefined : request.threads,
      source: 'settings',
      cores,
      workers,
    };
  }
  const engineOptions = request.engineOptions ?? {};
  if (THREAD_OPTION_KEYS.some((key) => engineOptions[key] !== undefined)) {
    return { intraOpThreads: undefined, ompThreads: undefined, source: 'user', cores, workers };
  }
  if (userOmp) {
    // The user's per-engine thread count, for every engine: left unset, an engine without
    // OpenMP (ONNX Runtime) would start one thread per core in each worker.
    const omp = Number(request.userOmpThreads);
    const intraOpThreads = Number.isSafeInteger(omp) && omp > 0 ? omp : undefined;
    return { intraOpThreads, ompThreads: undefined, source: 'user', cores, workers };
  }
  const threads = Math.max(1, Math.floor(cores / workers));
  return { intraOpThreads: threads, ompThreads: threads, source: 'budget', cores, workers };
}

/** The value this process's pools gave OMP_NUM_THREADS, if they did. */
let ompSetByPool: string | undefined;

/**
 * Set beside OMP_NUM_THREADS when a pool chose it: processes started from this one inherit
 * both, and must not take the pool's budget for the user's choice.
 */
export const OMP_FROM_POOL_ENV = 'KILN_OMP_NUM_THREADS_FROM_POOL';

/**
 * `OMP_NUM_THREADS` as the user set it: undefined when unset, empty, or set by a pool of this
 * process or of the one that started it.
 */
export function userOmpThreads(
  env: Readonly<Record<string, string | undefined>> = process.env,
): string | undefined {
  const value = env.OMP_NUM_THREADS?.trim();
  if (value === undefined || value === '') return undefined;
  return value === ompSetByPool || value === env[OMP_FROM_POOL_ENV] ? undefined : value;
}

/**
 * Sets OMP_NUM_THREADS for the whole process when the user has not: OpenMP runtimes read the
 * process environment (not a worker thread's copy) once, when they load, so this reaches
 * engines loaded afterwards. The first pool to set it wins.
 */
export function applyOmpBudget(threads: number | undefined): void {
  if (threads === undefined || ompSetByPool !== undefined || userOmpThreads() !== undefined) return;
  ompSetByPool = String(threads);
  process.env.OMP_NUM_THREADS = ompSetByPool;
  process.env[OMP_FROM_POOL_ENV] = ompSetByPool;
}
