import { describe, expect, it } from 'vitest';
import { isSendableHeaderValue, sendableHeaders } from './response-headers.js';

describe('sendableHeaders', () => {
  it("keeps a model's headers but not those the server writes itself", () => {
    expect(
      sendableHeaders({
        'x-model-version': '3',
        'cache-control': 'no-store',
        'Content-Length': '1',
        'transfer-encoding': 'chunked',
        connection: 'close',
        'content-type': 'text/html',
      }),
    ).toEqual({ 'x-model-version': '3', 'cache-control': 'no-store' });
    expect(sendableHeaders({ connection: 'close' })).toBeUndefined();
  });

  it('drops names and values that are not valid HTTP instead of failing the answer', () => {
    expect(
      sendableHeaders({
        'bad name': '1',
        'x-split': 'a\r\nset-cookie: stolen=1',
        'x-nul': 'a\u0000b',
        'x-wide': 'snow\u2603',
        'x-long': 'y'.repeat(8193),
        'x-ok': 'café',
      }),
    ).toEqual({ 'x-ok': 'café' });
    expect(isSendableHeaderValue('image/png')).toBe(true);
    expect(isSendableHeaderValue('text/html\r\nx-evil: 1')).toBe(false);
  });
});
