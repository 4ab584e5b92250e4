import { describe, expect, it } from 'vitest';
import { applyOmpBudget, planThreads, userOmpThreads } from './thread-budget.js';

describe('planThreads', () => {
  it('gives each of the most workers that may run an equal share of the cores', () => {
    expect(planThreads({ cores: 8, cpuWorkers: 3 })).toEqual({
      intraOpThreads: 2,
      ompThreads: 2,
      source: 'budget',
      cores: 8,
      workers: 3,
    });
    expect(planThreads({ cores: 2, cpuWorkers: 4 }).intraOpThreads).toBe(1);
    expect(planThreads({ cores: 16, cpuWorkers: 0 }).intraOpThreads).toBe(16);
  });

  it('never oversubscribes: workers × threads stays within the cores when workers ≤ cores', () => {
    for (let cores = 1; cores <= 32; cores++) {
      for (let workers = 1; workers <= cores; workers++) {
        const { intraOpThreads } = planThreads({ cores, cpuWorkers: workers });
        expect(workers * intraOpThreads!).toBeLessThanOrEqual(cores);
        expect(intraOpThreads).toBeGreaterThanOrEqual(1);
      }
    }
  });

  it("keeps the pool's threads setting", () => {
    expect(planThreads({ cores: 8, cpuWorkers: 4, threads: 3 })).toMatchObject({
      intraOpThreads: 3,
      ompThreads: 3,
      source: 'settings',
    });
  });

  it('follows the threads the user set in engine options or OMP_NUM_THREADS', () => {
    for (const key of ['intraOpNumThreads', 'num_threads', 'numThreads']) {
      expect(planThreads({ cores: 8, cpuWorkers: 2, engineOptions: { [key]: '6' } })).toMatchObject(
        {
          intraOpThreads: undefined,
          ompThreads: undefined,
          source: 'user',
        },
      );
    }
    // OMP_NUM_THREADS is the user's count for every engine, ONNX Runtime's intra-op pool too.
    expect(planThreads({ cores: 8, cpuWorkers: 2, userOmpThreads: '3' })).toMatchObject({
      intraOpThreads: 3,
      ompThreads: undefined,
      source: 'user',
    });
    expect(planThreads({ cores: 8, cpuWorkers: 2, userOmpThreads: 'many' })).toMatchObject({
      intraOpThreads: undefined,
      ompThreads: undefined,
      source: 'user',
    });
    // The pool's own setting still applies to intra-op threads, but OpenMP keeps the user's.
    expect(planThreads({ cores: 8, cpuWorkers: 2, threads: 2, userOmpThreads: '3' })).toMatchObject(
      {
        intraOpThreads: 2,
        ompThreads: undefined,
      },
    );
  });
});

describe('userOmpThreads', () => {
  it('reads a value the user set and ignores an empty one', () => {
    expect(userOmpThreads({ OMP_NUM_THREADS: ' 4 ' })).toBe('4');
    expect(userOmpThreads({ OMP_NUM_THREADS: '' })).toBeUndefined();
    expect(userOmpThreads({})).toBeUndefined();
  });

  it('does not take the budget a parent process’s pool set for the user’s choice', () => {
    expect(
      userOmpThreads({ OMP_NUM_THREADS: '1', KILN_OMP_NUM_THREADS_FROM_POOL: '1' }),
    ).toBeUndefined();
    // The user changed it since: theirs again.
    expect(userOmpThreads({ OMP_NUM_THREADS: '3', KILN_OMP_NUM_THREADS_FROM_POOL: '1' })).toBe('3');
  });
});

describe('applyOmpBudget', () => {
  it('sets OMP_NUM_THREADS for the process once and keeps treating it as not the user’s', () => {
    const saved = process.env.OMP_NUM_THREADS;
    const savedMark = process.env.KILN_OMP_NUM_THREADS_FROM_POOL;
    delete process.env.OMP_NUM_THREADS;
    try {
      applyOmpBudget(2);
      expect(process.env.OMP_NUM_THREADS).toBe('2');
      expect(userOmpThreads()).toBeUndefined();
      // What a child process started now inherits: still not the user's choice there.
      expect(process.env.KILN_OMP_NUM_THREADS_FROM_POOL).toBe('2');
      applyOmpBudget(5);
      expect(process.env.OMP_NUM_THREADS).toBe('2');
    } finally {
      if (saved === undefined) delete process.env.OMP_NUM_THREADS;
      else process.env.OMP_NUM_THREADS = saved;
      if (savedMark === undefined) delete process.env.KILN_OMP_NUM_THREADS_FROM_POOL;
      else process.env.KILN_OMP_NUM_THREADS_FROM_POOL = savedMark;
    }
  });
});
