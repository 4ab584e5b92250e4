import { describe, expect, it } from 'vitest';
import { workerEnv } from './thread-env.js';

describe('workerEnv', () => {
  it("gives a worker the pool's thread budget as OMP_NUM_THREADS, MKL's and OpenBLAS's", () => {
    expect(workerEnv({ A: '1' }, 2, {})).toEqual({
      OMP_NUM_THREADS: '2',
      MKL_NUM_THREADS: '2',
      OPENBLAS_NUM_THREADS: '2',
      A: '1',
    });
  });

  it("leaves what the server's environment sets for MKL and OpenBLAS, and what option.env sets", () => {
    expect(
      workerEnv({ OMP_NUM_THREADS: '3' }, 1, { MKL_NUM_THREADS: '4', OMP_NUM_THREADS: '8' }),
    ).toEqual({ OMP_NUM_THREADS: '3', OPENBLAS_NUM_THREADS: '1' });
  });

  it('adds nothing without a budget (the user chose the threads through engine options)', () => {
    expect(workerEnv({ A: '1' }, undefined, {})).toEqual({ A: '1' });
  });
});
