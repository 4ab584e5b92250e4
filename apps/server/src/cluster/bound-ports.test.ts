import { describe, expect, it } from 'vitest';
import { loadServerConfig } from '../config/server-config.js';
import { withBoundPorts } from './bound-ports.js';

const bound = {
  inference: 'http://127.0.0.1:41001',
  management: 'http://127.0.0.1:41002',
  metrics: 'http://127.0.0.1:41003',
  grpc: '127.0.0.1:41004',
};

/** The server's settings with these config.properties keys set explicitly. */
const configWith = (overrides: Record<string, string>) => loadServerConfig({ env: {}, overrides });

describe('withBoundPorts (what a later ingress process listens on)', () => {
  it('gives each address on port 0 the port the first process bound, keeping its host', () => {
    const config = configWith({
      inference_address: 'http://localhost:0',
      management_address: 'http://127.0.0.1:0',
      metrics_address: 'http://0.0.0.0:0',
      grpc_address: '[::1]:0',
    });
    const later = withBoundPorts(config, bound);
    expect(later.inferenceAddress).toBe('http://localhost:41001');
    expect(later.managementAddress).toBe('http://127.0.0.1:41002');
    expect(later.metricsAddress).toBe('http://0.0.0.0:41003');
    expect(later.grpcAddress).toBe('[::1]:41004');
  });

  it('leaves addresses with a port of their own as they are', () => {
    const config = configWith({
      inference_address: 'http://127.0.0.1:8080',
      management_address: 'http://127.0.0.1:0',
    });
    const later = withBoundPorts(config, bound);
    expect(later.inferenceAddress).toBe('http://127.0.0.1:8080');
    expect(later.managementAddress).toBe('http://127.0.0.1:41002');
    expect(later.metricsAddress).toBe(config.metricsAddress);
    expect(later.grpcAddress).toBeUndefined();
  });
});
