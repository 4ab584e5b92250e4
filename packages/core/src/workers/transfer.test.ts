import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { KilnError } from '../errors.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import {
  type NDListMessage,
  type ServingInputMessage,
  type ServingOutputMessage,
  TransferList,
  ndListFromMessage,
  ndListToMessage,
  servingInputFromMessage,
  servingInputToMessage,
  servingInputViews,
  servingOutputFromMessage,
  servingOutputToMessage,
  tensorFromMessage,
} from './transfer.js';

const ports: MessagePort[] = [];
afterEach(() => {
  for (const port of ports.splice(0)) port.close();
});

/** Sends a value through a real message channel, as a worker thread would receive it. */
function roundTrip<T>(value: T, transfer: TransferList): Promise<T> {
  const { port1, port2 } = new MessageChannel();
  ports.push(port1, port2);
  const received = new Promise<T>((resolve) => port2.once('message', (v: T) => resolve(v)));
  port1.postMessage(value, transfer.transfer);
  return received;
}

describe('TransferList', () => {
  it('moves a view that spans its whole buffer', async () => {
    const data = new Float32Array([1, 2, 3, 4]);
    const list = NDList.of(new Tensor('float32', data, [2, 2], 'x'));
    const transfer = new TransferList('move');
    const back = ndListFromMessage(await roundTrip(ndListToMessage(list, transfer), transfer));
    expect(data.length).toBe(0); // the sender's buffer was detached, not copied
    expect(back.get('x').shape).toEqual([2, 2]);
    expect(Array.from(back.get('x').data as Float32Array)).toEqual([1, 2, 3, 4]);
  });

  it('copies only the visible part of a partial view and leaves its buffer alone', async () => {
    const whole = new Float32Array([1, 2, 3, 4, 5, 6]);
    const view = whole.subarray(2, 4);
    const transfer = new TransferList('move');
    const message = ndListToMessage(NDList.of(new Tensor('float32', view, [2])), transfer);
    const back = ndListFromMessage(await roundTrip(message, transfer));
    expect(Array.from(whole)).toEqual([1, 2, 3, 4, 5, 6]);
    const data = back.get(0).data as Float32Array;
    expect(Array.from(data)).toEqual([3, 4]);
    expect(data.buffer.byteLength).toBe(8);
  });

  it("never detaches Node's shared Buffer pool", async () => {
    const body = Buffer.from('{"a":1}');
    const neighbour = Buffer.from('still here');
    const transfer = new TransferList('move');
    const message = servingInputToMessage({ body, contentType: 'application/json' }, transfer);
    const back = servingInputFromMessage(await roundTrip(message, transfer));
    expect(Buffer.from(back.body!).toString()).toBe('{"a":1}');
    expect(body.toString()).toBe('{"a":1}');
    expect(neighbour.toString()).toBe('still here');
  });

  it('copy mode leaves every sender buffer intact', async () => {
    const data = new Int32Array([7, 8, 9]);
    const transfer = new TransferList('copy');
    const back = ndListFromMessage(
      await roundTrip(
        ndListToMessage(NDList.of(new Tensor('int32', data, [3])), transfer),
        transfer,
      ),
    );
    expect(Array.from(data)).toEqual([7, 8, 9]);
    expect(Array.from(back.get(0).data as Int32Array)).toEqual([7, 8, 9]);
  });

  it('makes postMessage throw for a view whose buffer an earlier message moved away', async () => {
    const body = new Uint8Array([1, 2, 3]);
    const first = new TransferList('move');
    await roundTrip(
      servingInputToMessage({ body, contentType: 'application/x-npy' }, first),
      first,
    );
    expect(body.byteLength).toBe(0);
    for (const mode of ['move', 'move-owned', 'copy'] as const) {
      const again = new TransferList(mode);
      // Listed, the detached buffer would make Node drop the message without a word.
      expect(() => {
        const message = servingInputToMessage({ body, contentType: 'application/x-npy' }, again);
        new MessageChannel().port1.postMessage(message, again.transfer);
      }).toThrow(/detached/);
    }
  });

  it('puts the copies of a batch in one reserved buffer, each view aligned and of its kind', async () => {
    const inputs = [
      { body: Buffer.from('abc'), contentType: 'text/plain' },
      { tensors: NDList.of(new Tensor('float64', new Float64Array([1.5, -2]), [2], 'x')) },
      { body: new Uint8Array([9, 8, 7, 6, 5]) },
    ];
    const views = inputs.flatMap((input) => [...servingInputViews(input)]);
    const reserveBytes = TransferList.bytesToCopy('copy', views);
    expect(reserveBytes).toBe(8 + 16 + 5);
    const transfer = new TransferList('copy', { reserveBytes });
    const messages = inputs.map((input) => servingInputToMessage(input, transfer));
    expect(transfer.transfer).toHaveLength(1);
    const back = (await roundTrip(messages, transfer)).map(servingInputFromMessage);
    expect(new TextDecoder().decode(back[0]!.body)).toBe('abc');
    expect(back[0]!.body).toBeInstanceOf(Uint8Array);
    const x = back[1]!.tensors!.get('x').data as Float64Array;
    expect(x).toBeInstanceOf(Float64Array);
    expect(x.byteOffset % 8).toBe(0);
    expect(Array.from(x)).toEqual([1.5, -2]);
    expect(Array.from(back[2]!.body!)).toEqual([9, 8, 7, 6, 5]);
    // All three share the one buffer; the senders keep theirs.
    expect(new Set(back.map((b) => (b.body ?? x).buffer)).size).toBe(1);
    expect(Array.from(inputs[2]!.body!)).toEqual([9, 8, 7, 6, 5]);
  });

  it('gives a copy that does not fit the reserve a buffer of its own', async () => {
    const transfer = new TransferList('copy', { reserveBytes: 4 });
    const small = servingInputToMessage({ body: new Uint8Array([1, 2, 3]) }, transfer);
    const large = servingInputToMessage({ body: new Uint8Array([4, 5, 6, 7, 8, 9]) }, transfer);
    expect(transfer.transfer).toHaveLength(2);
    const [a, b] = await roundTrip([small, large], transfer);
    expect(Array.from(a!.body!)).toEqual([1, 2, 3]);
    expect(Array.from(b!.body!)).toEqual([4, 5, 6, 7, 8, 9]);
  });

  it('reserves nothing for what moves: whole views in move mode, owned memory', () => {
    const whole = new Float32Array(4);
    const part = new Float32Array(8).subarray(2, 5);
    expect(
      TransferList.bytesToCopy('move', [
        { view: whole, owned: false },
        { view: part, owned: false },
      ]),
    ).toBe(12);
    expect(TransferList.bytesToCopy('move-owned', [{ view: part, owned: true }])).toBe(0);
    expect(TransferList.bytesToCopy('move-owned', [{ view: whole, owned: false }])).toBe(16);
  });

  it('lists a buffer shared by two tensors once', () => {
    const data = new Float32Array([1, 2]);
    const transfer = new TransferList('move');
    ndListToMessage(
      NDList.of(new Tensor('float32', data, [2], 'a'), new Tensor('float32', data, [2], 'b')),
      transfer,
    );
    expect(transfer.transfer).toHaveLength(1);
  });
});

describe('serving messages', () => {
  it('round-trips every tensor kind, names and metadata', async () => {
    const input = {
      contentType: 'application/json',
      headers: { 'x-id': '42' },
      tensors: NDList.of(
        new Tensor('int64', new BigInt64Array([1n, -2n]), [2], 'ids'),
        new Tensor('string', ['a', 'b', 'c'], [3], 'words'),
        new Tensor('bool', new Uint8Array([1, 0]), [1, 2]),
      ),
    };
    const transfer = new TransferList('move');
    const back = servingInputFromMessage(
      await roundTrip<ServingInputMessage>(servingInputToMessage(input, transfer), transfer),
    );
    expect(back.contentType).toBe('application/json');
    expect(back.headers).toEqual({ 'x-id': '42' });
    expect(back.body).toBeUndefined();
    expect(back.tensors!.names).toEqual(['ids', 'words', undefined]);
    expect(back.tensors!.get('ids').toNested()).toEqual([1, -2]);
    expect(back.tensors!.get('words').toNested()).toEqual(['a', 'b', 'c']);
    expect(back.tensors!.get(2).toNested()).toEqual([[true, false]]);
  });

  it('round-trips tensor and JSON outputs', async () => {
    const transfer = new TransferList('move');
    const tensors = servingOutputToMessage(
      {
        type: 'tensors',
        tensors: NDList.of(new Tensor('float64', new Float64Array([0.5]), [1], 'p')),
      },
      transfer,
    );
    const json = servingOutputToMessage(
      { type: 'json', value: [{ label: 'cat', p: 0.9 }] },
      transfer,
    );
    const withHeaders = servingOutputToMessage(
      { type: 'json', value: 1, headers: { 'x-model-version': '3' }, status: 204 },
      transfer,
    );
    const [t, j, h] = await roundTrip<ServingOutputMessage[]>(
      [tensors, json, withHeaders],
      transfer,
    );
    const out = servingOutputFromMessage(t!);
    expect(out.type === 'tensors' && out.tensors.get('p').toNested()).toEqual([0.5]);
    expect(servingOutputFromMessage(j!)).toEqual({
      type: 'json',
      value: [{ label: 'cat', p: 0.9 }],
    });
    expect(servingOutputFromMessage(h!)).toEqual({
      type: 'json',
      value: 1,
      headers: { 'x-model-version': '3' },
      status: 204,
    });
  });

  it('moves the whole buffer of an owned input, keeping view offsets, and copies the rest', async () => {
    const body = new Uint8Array(new ArrayBuffer(64), 8, 48);
    const x = new Float32Array(body.buffer, 16, 4).fill(2);
    const transfer = new TransferList('move-owned');
    const owned = servingInputToMessage(
      { body, tensors: NDList.of(new Tensor('float32', x, [4], 'x')), owned: true },
      transfer,
    );
    const shared = new Float32Array(new ArrayBuffer(32), 8, 4).fill(3);
    const borrowed = servingInputToMessage(
      { tensors: NDList.of(new Tensor('float32', shared, [4], 'y')) },
      transfer,
    );
    expect(transfer.transfer).toHaveLength(2); // the owned buffer, and the borrowed view's copy
    const [a, b] = await roundTrip<ServingInputMessage[]>([owned, borrowed], transfer);
    expect(body.byteLength).toBe(0); // moved: the sender's views are empty
    expect(shared.byteLength).toBe(16); // copied: the caller keeps its memory
    const x2 = servingInputFromMessage(a!).tensors!.get('x').data as Float32Array;
    expect([x2.byteOffset, x2.buffer.byteLength, Array.from(x2)]).toEqual([16, 64, [2, 2, 2, 2]]);
    expect(servingInputFromMessage(a!).body!.byteOffset).toBe(8);
    expect(Array.from(servingInputFromMessage(b!).tensors!.get('y').data as Float32Array)).toEqual([
      3, 3, 3, 3,
    ]);

    const copied = new TransferList('copy');
    servingInputToMessage({ body: new Uint8Array(8), owned: true }, copied);
    expect(copied.transfer[0]!.byteLength).toBe(8);
  });

  it('rejects malformed tensor messages with a KilnError', () => {
    const badDType = { dtype: 'complex64', shape: [1], name: undefined, data: new Float32Array(1) };
    expect(() => tensorFromMessage(badDType as never)).toThrow(KilnError);
    const wrongSize: NDListMessage = {
      tensors: [{ dtype: 'float32', shape: [3], name: undefined, data: new Float32Array(2) }],
    };
    expect(() => ndListFromMessage(wrongSize)).toThrow(/needs 3 elements/);
  });
});
