import { pino } from 'pino';
import { type KilnServer, loadServerConfig, startKilnServer } from '@kiln/server';

/**
 * `kiln serve` in this process on ephemeral loopback ports (no token, no access log), once
 * every named model answers Healthy on /ping; a model that fails to load is an error.
 */
export async function startBenchServer(
  models: readonly string[],
  names: readonly string[],
  logLevel: 'warn' | 'error',
): Promise<KilnServer> {
  const server = await startKilnServer({
    config: loadServerConfig({
      env: {},
      overrides: {
        inference_address: 'http://127.0.0.1:0',
        management_address: 'http://127.0.0.1:0',
        metrics_address: 'http://127.0.0.1:0',
        disable_token_authorization: 'true',
        enable_access_log: 'false',
      },
    }),
    logger: pino({ level: logLevel }),
    models: [...models],
  });
  for (let i = 0; i < 600; i++) {
    const ping = (await (await fetch(`${server.urls.inference}/ping`)).json()) as Record<
      string,
      { status: string }
    >;
    if (names.some((m) => ping[m]?.status === 'FAILED'))
      throw new Error(`Kiln failed to load ${names.join(', ')}`);
    if (names.every((m) => ping[m]?.status === 'Healthy')) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  return server;
}

/** Where a Python model's calls spent their time, from the server's own `/metrics` (means). */
export async function perCallSplit(metricsUrl: string, model: string): Promise<string> {
  const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
  const meanMs = (metric: string) =>
    (1000 *
      Number(new RegExp(`${metric}_sum\\{model="${model}"\\} ([\\d.e+-]+)`).exec(metrics)?.[1])) /
    Number(new RegExp(`${metric}_count\\{model="${model}"\\} (\\d+)`).exec(metrics)?.[1]);
  return `${model}: per call ${meanMs('kiln_inference_seconds').toFixed(2)} ms forward = ${meanMs('kiln_python_handler_seconds').toFixed(2)} ms handler + ${meanMs('kiln_python_ipc_seconds').toFixed(2)} ms IPC; queue ${meanMs('kiln_queue_seconds').toFixed(2)} ms per request`;
}
