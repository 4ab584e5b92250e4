import { randomBytes } from 'node:crypto';
import { type KilnServer, loadServerConfig, startKilnServer } from '@kiln/server';

/**
 * An in-process Kiln server as the tuning benches run one: every listener on an ephemeral
 * loopback port, a fresh management token, no access log (its lines are not what is timed).
 */
export function startBenchServer(models: readonly string[]): Promise<KilnServer> {
  return startKilnServer({
    config: loadServerConfig({
      env: {},
      overrides: {
        management_token: randomBytes(16).toString('hex'),
        inference_address: 'http://127.0.0.1:0',
        management_address: 'http://127.0.0.1:0',
        metrics_address: 'http://127.0.0.1:0',
        enable_access_log: 'false',
      },
    }),
    models: [...models],
  });
}
