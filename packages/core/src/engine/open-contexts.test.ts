import { describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode } from '../errors.js';
import { OpenContexts } from './open-contexts.js';

/** A context that releases itself on close, as engine contexts do, and counts its closes. */
class CountingContext {
  closes = 0;

  constructor(
    private readonly contexts: OpenContexts<CountingContext>,
    private readonly closing: () => Promise<void> = () => Promise.resolve(),
  ) {}

  close(): Promise<void> {
    this.closes++;
    this.contexts.release(this);
    return this.closing();
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('OpenContexts', () => {
  it('counts tracked contexts until they close', async () => {
    const contexts = new OpenContexts<CountingContext>('resnet');
    const a = await contexts.track(new CountingContext(contexts));
    const b = await contexts.track(new CountingContext(contexts));
    expect(contexts.size).toBe(2);

    await a.close();
    expect(contexts.size).toBe(1);
    await b.close();
    expect(contexts.size).toBe(0);
    expect(contexts.closed).toBe(false);
  });

  it('closes every open context on closeAll and waits for them', async () => {
    const contexts = new OpenContexts<CountingContext>('resnet');
    const slow = deferred();
    const a = await contexts.track(new CountingContext(contexts, () => slow.promise));
    const b = await contexts.track(new CountingContext(contexts));
    const released = await contexts.track(new CountingContext(contexts));
    await released.close();

    let done = false;
    const closing = contexts.closeAll().then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    slow.resolve();
    await closing;

    expect([a.closes, b.closes, released.closes]).toEqual([1, 1, 1]);
    expect(contexts.size).toBe(0);
    expect(contexts.closed).toBe(true);
  });

  it('refuses contexts after closeAll, closing the one it was handed', async () => {
    const contexts = new OpenContexts<CountingContext>('resnet');
    expect(() => contexts.assertOpen()).not.toThrow();
    await contexts.closeAll();

    expect(() => contexts.assertOpen()).toThrow(/model resnet is disposed/);
    const late = new CountingContext(contexts);
    const error: unknown = await contexts.track(late).catch((e: unknown) => e);
    expect(KilnError.is(error, KilnErrorCode.Closed)).toBe(true);
    expect((error as KilnError).message).toBe('model resnet is disposed');
    expect(late.closes).toBe(1);
    expect(contexts.size).toBe(0);
  });

  it('still refuses a late context whose close fails', async () => {
    const contexts = new OpenContexts<CountingContext>('resnet');
    await contexts.closeAll();
    const late = new CountingContext(contexts, () => Promise.reject(new Error('native')));
    await expect(contexts.track(late)).rejects.toMatchObject({ code: KilnErrorCode.Closed });
    expect(late.closes).toBe(1);
  });

  it('closes each context once when closeAll is called again', async () => {
    const contexts = new OpenContexts<CountingContext>('resnet');
    const a = await contexts.track(new CountingContext(contexts));
    let spares = 0;
    const spare = () => Promise.resolve().then(() => spares++);

    await Promise.all([contexts.closeAll(spare()), contexts.closeAll(spare())]);
    await contexts.closeAll();
    expect(a.closes).toBe(1);
    expect(spares).toBe(2);
    expect(contexts.closed).toBe(true);
  });

  it('closes the others when one close fails', async () => {
    const contexts = new OpenContexts<CountingContext>('resnet');
    const rejecting = await contexts.track(
      new CountingContext(contexts, () => Promise.reject(new Error('busy'))),
    );
    const throwing = await contexts.track(
      new CountingContext(contexts, () => {
        throw new Error('thrown before any promise');
      }),
    );
    const healthy = await contexts.track(new CountingContext(contexts));

    await expect(
      contexts.closeAll(Promise.reject(new Error('spare failed')), undefined),
    ).resolves.toBeUndefined();
    expect([rejecting.closes, throwing.closes, healthy.closes]).toEqual([1, 1, 1]);
    expect(contexts.size).toBe(0);
  });
});
