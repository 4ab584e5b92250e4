import { describe, expect, it } from 'vitest';
import { type AppliedOp, type ManagementOp, appendApplied } from './management-ops.js';

const register = (name: string, url = `/store/${name}`): AppliedOp => ({
  op: { kind: 'register', request: { url }, synchronous: true },
  name,
});
const scale = (name: string, minWorkers?: number, maxWorkers?: number): AppliedOp => ({
  op: {
    kind: 'scale',
    name,
    version: undefined,
    limits: {
      ...(minWorkers === undefined ? {} : { minWorkers }),
      ...(maxWorkers === undefined ? {} : { maxWorkers }),
    },
    synchronous: false,
  },
  name,
});
const unregister = (name: string, version?: string): AppliedOp => ({
  op: { kind: 'unregister', name, version },
  name,
});
const kinds = (log: AppliedOp[]) => log.map((a) => `${a.op.kind} ${a.name}`);
const replay = (...ops: AppliedOp[]) => ops.reduce<AppliedOp[]>(appendApplied, []);

describe('appendApplied (what a replacement process replays)', () => {
  it('keeps calls in the order they were applied', () => {
    expect(kinds(replay(register('a'), register('b'), scale('a', 2, 2)))).toEqual([
      'register a',
      'register b',
      'scale a',
    ]);
  });

  it('keeps only the last scaling that sets both limits, and every partial one after it', () => {
    const log = replay(scale('a', 1, 1), scale('a', 2), scale('b', 3, 3), scale('a', 4, 4));
    expect(
      log.map((a) => [a.name, (a.op as Extract<ManagementOp, { kind: 'scale' }>).limits]),
    ).toEqual([
      ['b', { minWorkers: 3, maxWorkers: 3 }],
      ['a', { minWorkers: 4, maxWorkers: 4 }],
    ]);
    expect(replay(scale('a', 4, 4), scale('a', undefined, 6))).toHaveLength(2);
  });

  it('forgets everything about a model unregistered whole, keeping the unregistration', () => {
    const log = replay(register('a'), scale('a', 2, 2), register('b'), unregister('a'));
    expect(kinds(log)).toEqual(['register b', 'unregister a']);
    // Registered again afterwards: the new registration follows the unregistration.
    expect(kinds(appendApplied(log, register('a')))).toEqual([
      'register b',
      'unregister a',
      'register a',
    ]);
  });

  it('keeps one default per model, and drops a version’s settings with the version', () => {
    const setDefault = (version: string): AppliedOp => ({
      op: { kind: 'set-default', name: 'a', version },
      name: 'a',
    });
    expect(replay(setDefault('1'), setDefault('2')).map((a) => a.op)).toEqual([
      { kind: 'set-default', name: 'a', version: '2' },
    ]);
    const versioned: AppliedOp = {
      op: {
        kind: 'scale',
        name: 'a',
        version: '1',
        limits: { minWorkers: 2, maxWorkers: 2 },
        synchronous: false,
      },
      name: 'a',
    };
    expect(kinds(replay(register('a'), versioned, unregister('a', '1')))).toEqual([
      'register a',
      'unregister a',
    ]);
  });
});
