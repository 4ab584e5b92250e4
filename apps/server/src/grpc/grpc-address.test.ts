import { describe, expect, it } from 'vitest';
import { loadServerConfig } from '../config/server-config.js';
import { parseGrpcAddress } from './grpc-address.js';

describe('grpc_address', () => {
  it('parses host:port for IPv4, IPv6 and names, with or without grpc://', () => {
    expect(parseGrpcAddress('127.0.0.1:8085')).toEqual({ host: '127.0.0.1', port: 8085 });
    expect(parseGrpcAddress('[::1]:9000')).toEqual({ host: '::1', port: 9000 });
    expect(parseGrpcAddress('grpc://0.0.0.0:8081')).toEqual({ host: '0.0.0.0', port: 8081 });
    expect(parseGrpcAddress('localhost:0')).toEqual({ host: 'localhost', port: 0 });
  });

  it('refuses what is not an address', () => {
    for (const bad of ['8085', 'http://127.0.0.1:8085', '127.0.0.1:70000', '::1:8085', ''])
      expect(() => parseGrpcAddress(bad), bad).toThrow(/not an address like 127.0.0.1:8085/);
  });

  it('is off by default and set by config or KILN_GRPC_ADDRESS', () => {
    expect(loadServerConfig({ env: {} }).grpcAddress).toBeUndefined();
    expect(loadServerConfig({ env: { KILN_GRPC_ADDRESS: '0.0.0.0:8085' } }).grpcAddress).toBe(
      '0.0.0.0:8085',
    );
    expect(() => loadServerConfig({ env: { KILN_GRPC_ADDRESS: 'nope' } })).toThrow(
      /grpc_address=nope/,
    );
  });
});
