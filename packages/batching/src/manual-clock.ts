import type { Clock } from './clock.js';

interface Timer {
  readonly id: number;
  readonly due: number;
  readonly fn: () => void;
}

/**
 * A clock that moves only when told to, for deterministic tests of timing rules. Timers fire
 * in order of due time (then of creation) while `advance` walks time forward.
 */
export class ManualClock implements Clock {
  private time: number;
  private nextId = 1;
  // Binary min-heap on (due, id): thousands of job deadlines stay cheap to schedule and fire.
  private readonly heap: Timer[] = [];
  // Ids of timers neither fired nor cleared; heap entries missing here are skipped.
  private readonly live = new Set<number>();

  constructor(start = 0) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): number {
    const id = this.nextId++;
    this.live.add(id);
    this.push({ id, due: this.time + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    if (typeof handle === 'number') this.live.delete(handle);
  }

  /** Timers scheduled and neither fired nor cleared. */
  get pending(): number {
    return this.live.size;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const target = this.time + ms;
    for (;;) {
      const next = this.heap[0];
      if (!next || next.due > target) break;
      this.pop();
      if (!this.live.delete(next.id)) continue;
      this.time = next.due;
      next.fn();
    }
    this.time = target;
  }

  /** Time of the next live timer, if any. */
  nextDue(): number | undefined {
    while (this.heap[0] && !this.live.has(this.heap[0].id)) this.pop();
    return this.heap[0]?.due;
  }

  private push(timer: Timer): void {
    const heap = this.heap;
    heap.push(timer);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private pop(): Timer | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length === 0 || !last) return top;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < heap.length && before(heap[left]!, heap[least]!)) least = left;
      if (right < heap.length && before(heap[right]!, heap[least]!)) least = right;
      if (least === i) break;
      [heap[i], heap[least]] = [heap[least]!, heap[i]!];
      i = least;
    }
    return top;
  }
}

function before(a: Timer, b: Timer): boolean {
  return a.due < b.due || (a.due === b.due && a.id < b.id);
}
