import { describe, expect, it } from 'vitest';
import { OPENMP_SPIN_COUNT, workerEnv } from './thread-env.js';

describe('workerEnv', () => {
  it("gives a worker the pool's thread budget as OMP_NUM_THREADS, MKL's and OpenBLAS's", () => {
    expect(workerEnv({ A: '1' }, 2, {})).toEqual({
      GOMP_SPINCOUNT: OPENMP_SPIN_COUNT,
      OMP_NUM_THREADS: '2',
      MKL_NUM_THREADS: '2',
      OPENBLAS_NUM_THREADS: '2',
      A: '1',
    });
  });

  it("leaves what the server's environment sets for MKL and OpenBLAS, and what option.env sets", () => {
    expect(
      workerEnv({ OMP_NUM_THREADS: '3' }, 1, { MKL_NUM_THREADS: '4', OMP_NUM_THREADS: '8' }),
    ).toEqual({
      GOMP_SPINCOUNT: OPENMP_SPIN_COUNT,
      OMP_NUM_THREADS: '3',
      OPENBLAS_NUM_THREADS: '1',
    });
  });

  it('adds no thread counts without a budget (the user chose the threads through engine options)', () => {
    expect(workerEnv({ A: '1' }, undefined, {})).toEqual({
      GOMP_SPINCOUNT: OPENMP_SPIN_COUNT,
      A: '1',
    });
  });

  it("lets OpenMP's idle threads spin briefly, unless the server's environment or option.env says how they wait", () => {
    expect(workerEnv({}, undefined, { OMP_WAIT_POLICY: 'ACTIVE' })).toEqual({});
    expect(workerEnv({}, undefined, { GOMP_SPINCOUNT: '300000' })).toEqual({});
    expect(workerEnv({ GOMP_SPINCOUNT: '0' }, 1, {}).GOMP_SPINCOUNT).toBe('0');
    expect(workerEnv({ OMP_WAIT_POLICY: 'ACTIVE' }, undefined, {})).toEqual({
      OMP_WAIT_POLICY: 'ACTIVE',
    });
  });
});
