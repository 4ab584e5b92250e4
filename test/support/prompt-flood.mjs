// Sends CLIENTS text-generation requests at once, each with a prompt of BYTES 'a's, over the
// four generation APIs in turn, from a process of its own: a test then measures the server's
// event loop alone, not the cost of building and sending the bodies. Prints one JSON array of
// { route, status, body, ms } (status 0: the connection closed without an answer; ms from
// connecting to the answer).
// Usage: node prompt-flood.mjs BASE_URL CLIENTS BYTES
import net from 'node:net';

const [base, clients, bytes] = process.argv.slice(2);
const { hostname, port } = new URL(base);
const PIECE = 256 * 1024;
const WAIT_MS = 2000;

/** The request bytes: a JSON body with the prompt at `PROMPT`, written around it. */
function request(route, body) {
  const [before, after] = JSON.stringify(body).split('PROMPT');
  const length = Buffer.byteLength(before) + Number(bytes) + Buffer.byteLength(after);
  const head = `POST ${route} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
  return Buffer.concat([
    Buffer.from(head + before),
    Buffer.alloc(Number(bytes), 'a'),
    Buffer.from(after),
  ]);
}

const routes = [
  ['/v1/completions', { model: 'gpt', prompt: 'PROMPT', max_tokens: 4 }],
  ['/v1/chat/completions', { messages: [{ role: 'user', content: 'PROMPT' }] }],
  ['/predictions/gpt', { inputs: 'PROMPT' }],
  ['/v2/models/gpt/generate', { text_input: 'PROMPT' }],
].map(([route, body]) => ({ route, bytes: request(route, body) }));

function send({ route, bytes: data }) {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    const chunks = [];
    let done = false;
    let wait;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(wait);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const status = split < 0 ? 0 : Number(text.slice(0, split).split(' ')[1]);
      const ms = Math.round(performance.now() - started);
      resolve({ route, status, body: split < 0 ? '' : text.slice(split + 4), ms });
    };
    // The head and a first piece, then the rest unless the server answered meanwhile (as
    // curl waits after `Expect: 100-continue`): a server that refuses a body unread closes
    // the connection after its answer, and a client still writing then gets a reset instead.
    let sent = 0;
    const pump = () => {
      while (sent < data.length && chunks.length === 0 && !socket.destroyed) {
        const piece = data.subarray(sent, sent + PIECE);
        sent += piece.length;
        if (!socket.write(piece)) return void socket.once('drain', pump);
      }
    };
    socket.on('connect', () => {
      socket.write(data.subarray(0, (sent = PIECE)));
      wait = setTimeout(pump, WAIT_MS);
    });
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, split))?.[1];
      if (split >= 0 && length && Buffer.byteLength(text.slice(split + 4)) >= Number(length))
        finish();
    });
    // A server that answers before reading a refused body closes the connection under it.
    socket.on('error', finish);
    socket.on('close', finish);
  });
}

const answers = await Promise.all(
  Array.from({ length: Number(clients) }, (_, i) => send(routes[i % routes.length])),
);
process.stdout.write(JSON.stringify(answers));
