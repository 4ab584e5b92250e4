import net from 'node:net';

export interface RawAnswer {
  /** 0 when the server closed without answering. */
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** ms from the first byte sent to the answer (or the close). */
  readonly ms: number;
}

/**
 * Sends bytes exactly as given over a fresh TCP connection (what fetch refuses to send:
 * broken framing, odd methods, huge headers) and reads one answer. `then` runs after the first
 * write, for clients that send the rest slowly or never.
 */
export function rawRequest(
  base: string,
  head: string | Buffer,
  options: { timeoutMs?: number; then?: (socket: net.Socket) => void } = {},
): Promise<RawAnswer> {
  const { hostname, port } = new URL(base);
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname.replace(/^\[|\]$/g, ''));
    const chunks: Buffer[] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseAnswer(Buffer.concat(chunks), performance.now() - started));
    };
    const timer = setTimeout(finish, options.timeoutMs ?? 10_000);
    socket.on('connect', () => {
      socket.write(head);
      options.then?.(socket);
    });
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const answer = parseAnswer(Buffer.concat(chunks), 0);
      const length = Number(answer.headers['content-length'] ?? Number.NaN);
      if (answer.status !== 0 && Buffer.byteLength(answer.body) >= length) finish();
    });
    socket.on('error', finish);
    socket.on('close', finish);
  });
}

function parseAnswer(bytes: Buffer, ms: number): RawAnswer {
  const text = bytes.toString('utf8');
  const split = text.indexOf('\r\n\r\n');
  if (split < 0) return { status: 0, headers: {}, body: '', ms };
  const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0)
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return {
    status: Number(statusLine.split(' ')[1] ?? 0),
    headers,
    body: text.slice(split + 4),
    ms,
  };
}
