import { type PinResult, pinCurrentThread, processCores } from '@kiln/worker-pool';

/**
 * Keeps the server's event loop (the main thread) off the cores pinned workers use, as
 * TorchServe's launcher leaves the frontend the cores its workers do not take. The main thread
 * is pinned to the process's cores that no model's workers were given, while every loaded
 * model pins its workers and some core is left; otherwise it may run anywhere the process may.
 * Threads and processes the main thread starts inherit its mask, so a model that does not pin
 * (whose workers would be kept on the event loop's cores) unpins it before it loads.
 */
export class EventLoopPinning {
  /** The process's cores before anything was pinned. */
  private readonly all = processCores();
  private current: readonly number[] = this.all;
  /** What the last change did: pinned cores, or why it could not. */
  last: PinResult | undefined;

  /** Call on the main thread with the cores each loaded model's workers may take (undefined: not pinned). */
  update(reserved: readonly (readonly number[] | undefined)[]): void {
    if (reserved.length === 0 || reserved.some((cores) => cores === undefined))
      return this.release();
    const used = new Set(reserved.flatMap((cores) => cores!));
    const free = this.all.filter((cpu) => !used.has(cpu));
    this.pin(free.length > 0 ? free : this.all);
  }

  /** Lets the main thread (and what it starts next) run on every core of the process. */
  release(): void {
    this.pin(this.all);
  }

  /** Cores the event loop is kept on, when it is pinned. */
  get cores(): readonly number[] | undefined {
    return this.current.length < this.all.length ? this.current : undefined;
  }

  private pin(cores: readonly number[]): void {
    if (process.platform !== 'linux' || cores.join(',') === this.current.join(',')) return;
    this.last = pinCurrentThread(cores);
    this.current = this.last.pinned ? cores : this.all;
  }
}
