/** The variables numeric libraries read for their thread pools (OpenMP/torch, MKL, OpenBLAS). */
const LIBRARY_THREAD_VARIABLES = ['MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS'] as const;

/**
 * A Python worker's environment additions: the worker pool's thread budget for this worker
 * (`intraOpThreads`, cores ÷ workers unless the user chose) as `OMP_NUM_THREADS`, which torch
 * and numpy's OpenMP read when they load, and as MKL's and OpenBLAS's variables where the
 * server's environment does not set them. Without it every worker's torch starts one thread
 * per core, and two workers on two cores run four. `option.env` wins over all of them.
 */
export function workerEnv(
  optionEnv: Readonly<Record<string, string>>,
  intraOpThreads: number | undefined,
  processEnv: Readonly<Record<string, string | undefined>> = process.env,
): Readonly<Record<string, string>> {
  if (intraOpThreads === undefined) return optionEnv;
  const threads = String(intraOpThreads);
  const budget: Record<string, string> = { OMP_NUM_THREADS: threads };
  for (const name of LIBRARY_THREAD_VARIABLES) {
    if (!processEnv[name]) budget[name] = threads;
  }
  return { ...budget, ...optionEnv };
}
