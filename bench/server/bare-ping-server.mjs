// The least a server can do for a health check: node:http answering every request with a small
// JSON body, nothing else running in its process. bench/server probes it during the same load
// as a contender's /ping: what the probe sees of it is the machine's floor, not a server's.
// Run as its own process: `node bare-ping-server.mjs <port>`.
import http from 'node:http';

const port = Number(process.argv[2]);
http
  .createServer((_req, res) => {
    res.setHeader('Content-Type', 'application/json');
    res.end('{"status":"Healthy"}');
  })
  .listen(port, '127.0.0.1', () => process.send?.('ready'));
