import { KilnError, type KilnErrorCode } from '@kiln/core';

/** Lets pending promise callbacks (and one macrotask turn) run. */
export function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export type PromiseState<T> =
  { state: 'pending' } | { state: 'resolved'; value: T } | { state: 'rejected'; error: unknown };

/** Where a promise stands after pending callbacks have run, without waiting on it. */
export async function inspect<T>(promise: Promise<T>): Promise<PromiseState<T>> {
  let result: PromiseState<T> = { state: 'pending' };
  promise.then(
    (value) => (result = { state: 'resolved', value }),
    (error: unknown) => (result = { state: 'rejected', error }),
  );
  await flush();
  return result;
}

/** The KilnError code a promise rejected with; fails when it resolved or is pending. */
export async function rejectionCode(promise: Promise<unknown>): Promise<KilnErrorCode> {
  const result = await inspect(promise);
  if (result.state !== 'rejected')
    throw new Error(`expected a rejection, the promise is ${result.state}`);
  if (!(result.error instanceof KilnError))
    throw new Error(`expected a KilnError, got ${String(result.error)}`);
  return result.error.code;
}
