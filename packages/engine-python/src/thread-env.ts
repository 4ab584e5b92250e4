/** The variables numeric libraries read for their thread pools (OpenMP/torch, MKL, OpenBLAS). */
const LIBRARY_THREAD_VARIABLES = ['MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS'] as const;

/**
 * How long GNU OpenMP's idle threads (torch's, on Linux) spin before they sleep: 10k busy
 * loops, a thirtieth of libgomp's default (300k, milliseconds). After each forward
 * those spinning threads otherwise hold the cores the worker then needs to send its answer
 * and the server needs to write it. ResNet-18 in torch, 1 worker of 2 threads on 2 cores:
 * 1.8–2.0 → 1.0–1.2 ms a request outside `handle`.
 */
export const OPENMP_SPIN_COUNT = '10000';
/** A user who set either (for the server or in option.env) has chosen how OpenMP waits. */
const OPENMP_WAIT_VARIABLES = ['GOMP_SPINCOUNT', 'OMP_WAIT_POLICY'] as const;

/**
 * A Python worker's environment additions: the worker pool's thread budget for this worker
 * (`intraOpThreads`, cores ÷ workers unless the user chose) as `OMP_NUM_THREADS`, which torch
 * and numpy's OpenMP read when they load, and as MKL's and OpenBLAS's variables where the
 * server's environment does not set them. Without it every worker's torch starts one thread
 * per core, and two workers on two cores run four. OpenMP's idle threads spin briefly
 * (`OPENMP_SPIN_COUNT`) unless the server's environment or `option.env` says how they wait.
 * `option.env` wins over all of them.
 */
export function workerEnv(
  optionEnv: Readonly<Record<string, string>>,
  intraOpThreads: number | undefined,
  processEnv: Readonly<Record<string, string | undefined>> = process.env,
): Readonly<Record<string, string>> {
  const added: Record<string, string> = {};
  if (!OPENMP_WAIT_VARIABLES.some((name) => processEnv[name] || optionEnv[name])) {
    added.GOMP_SPINCOUNT = OPENMP_SPIN_COUNT;
  }
  if (intraOpThreads !== undefined) {
    const threads = String(intraOpThreads);
    added.OMP_NUM_THREADS = threads;
    for (const name of LIBRARY_THREAD_VARIABLES) {
      if (!processEnv[name]) added[name] = threads;
    }
  }
  return { ...added, ...optionEnv };
}
