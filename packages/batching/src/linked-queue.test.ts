import { describe, expect, it } from 'vitest';
import { LinkedQueue } from './linked-queue.js';

describe('LinkedQueue', () => {
  it('is FIFO and removes any node in place', () => {
    const queue = new LinkedQueue<string>();
    const nodes = ['a', 'b', 'c', 'd'].map((x) => queue.push(x));
    expect(queue.remove(nodes[1]!)).toBe(true);
    expect(queue.remove(nodes[3]!)).toBe(true);
    expect([...queue]).toEqual(['a', 'c']);
    expect(queue.size).toBe(2);
    expect(queue.shift()).toBe('a');
    expect(queue.peek()).toBe('c');
    queue.push('e');
    expect([...queue]).toEqual(['c', 'e']);
  });

  it('puts an unshifted value first, on an empty queue too', () => {
    const queue = new LinkedQueue<string>();
    const first = queue.unshift('b');
    queue.push('c');
    queue.unshift('a');
    expect([...queue]).toEqual(['a', 'b', 'c']);
    expect(queue.remove(first)).toBe(true);
    expect([...queue]).toEqual(['a', 'c']);
    expect(queue.shift()).toBe('a');
    expect(queue.shift()).toBe('c');
    expect(queue.size).toBe(0);
    queue.unshift('x');
    expect(queue.peek()).toBe('x');
    expect([...queue]).toEqual(['x']);
  });

  it('ignores a node that is gone or belongs to another queue', () => {
    const a = new LinkedQueue<number>();
    const b = new LinkedQueue<number>();
    const node = a.push(1);
    expect(b.remove(node)).toBe(false);
    expect(a.remove(node)).toBe(true);
    expect(a.remove(node)).toBe(false);
    expect(a.size).toBe(0);
    expect(a.shift()).toBeUndefined();
  });

  it('keeps removal from the middle cheap for long queues', () => {
    // Removing every other element: linear work grows 8× for 8× the elements, quadratic 64×.
    const time = (n: number) => {
      let best = Infinity;
      for (let round = 0; round < 5; round++) {
        const queue = new LinkedQueue<number>();
        const nodes = Array.from({ length: n }, (_, i) => queue.push(i));
        const start = performance.now();
        for (let i = 0; i < n; i += 2) queue.remove(nodes[i]!);
        while (queue.size > 0) queue.shift();
        best = Math.min(best, performance.now() - start);
      }
      return best;
    };
    time(20_000); // warm up the JIT
    const ratio = time(160_000) / Math.max(time(20_000), 0.05);
    expect(ratio).toBeLessThan(30);
  });
});
