/**
 * The floor under bench (a): the same two sockets a Kiln Python worker talks over (fd 3 and 4
 * of a child started by Node's child_process), carrying a length-prefixed payload to a Python
 * loop that sends it straight back — no Kiln framing, no Input/Output, no handler. What a call
 * costs here is what the machine charges for one round trip of that size between two processes
 * (two wake-ups, the copies through the kernel); Kiln's own share is what it costs above this.
 */
import { spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';

// Reads each payload into one buffer kept from call to call (nothing allocated per call), and
// writes it back with its prefix in one writev: the least Python can do with the bytes.
const ECHO = `
import os, socket
channel = socket.socket(fileno=3)
prefix = bytearray(4)
payload = bytearray(0)
while channel.recv_into(prefix, 4, socket.MSG_WAITALL) == 4:
    size = int.from_bytes(prefix, "little")
    if len(payload) != size:
        payload = bytearray(size)
    view = memoryview(payload)
    got = 0
    while got < size:
        got += channel.recv_into(view[got:], size - got, socket.MSG_WAITALL)
    os.writev(4, [prefix, payload])
`;

export interface BareEcho {
  /** One round trip of `payload` (sent with its 4-byte length prefix, awaited whole). */
  call(payload: Buffer): Promise<void>;
  close(): Promise<void>;
}

export function startBareEcho(python: string): BareEcho {
  const child = spawn(python, ['-c', ECHO], {
    stdio: ['ignore', 'ignore', 'inherit', 'pipe', 'pipe'],
  });
  const requests = child.stdio[3] as Writable;
  let expected = 0;
  let received = 0;
  let done: (() => void) | undefined;
  (child.stdio[4] as Readable).on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (received >= expected && done) {
      const resolve = done;
      done = undefined;
      resolve();
    }
  });
  const prefix = Buffer.alloc(4);
  return {
    call(payload) {
      prefix.writeUInt32LE(payload.length, 0);
      expected = 4 + payload.length;
      received = 0;
      const answered = new Promise<void>((resolve) => (done = resolve));
      requests.cork();
      requests.write(prefix);
      requests.write(payload);
      requests.uncork();
      return answered;
    },
    close() {
      return new Promise((resolve) => {
        child.once('exit', () => resolve());
        requests.end();
      });
    },
  };
}
