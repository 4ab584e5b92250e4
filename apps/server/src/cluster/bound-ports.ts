import { parseAddress, type ServerConfig } from '../config/server-config.js';
import { parseGrpcAddress } from '../grpc/grpc-address.js';
import type { ListenerInfo } from '../kiln-server.js';

/**
 * The ports the first ingress process bound, handed to every process started after it: with
 * an address on port 0 (any free port), a process replacing others that all died would bind
 * new ports, and the addresses the server printed would lead nowhere. Each address on port 0
 * takes the port bound for it; its host stays as configured.
 */
export function withBoundPorts(config: ServerConfig, bound: ListenerInfo): ServerConfig {
  const http = (configured: string, url: string): string => {
    if (parseAddress(configured).port !== 0) return configured;
    const address = new URL(configured);
    address.port = new URL(url).port;
    return address.origin;
  };
  const grpc = (configured: string | undefined): string | undefined => {
    if (!configured || !bound.grpc) return configured;
    const { host, port } = parseGrpcAddress(configured);
    if (port !== 0) return configured;
    const boundPort = parseGrpcAddress(bound.grpc).port;
    return host.includes(':') ? `[${host}]:${boundPort}` : `${host}:${boundPort}`;
  };
  return {
    ...config,
    inferenceAddress: http(config.inferenceAddress, bound.inference),
    managementAddress: http(config.managementAddress, bound.management),
    metricsAddress: http(config.metricsAddress, bound.metrics),
    grpcAddress: grpc(config.grpcAddress),
  };
}
