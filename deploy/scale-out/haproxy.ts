import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface Replica {
  readonly name: string;
  readonly httpPort: number;
  readonly grpcPort: number;
}

export interface HaproxyPorts {
  /** HTTP, every replica. */
  readonly http: number;
  /** gRPC (h2c), every replica. */
  readonly grpc: number;
  /** HTTP, the first replica only (the 1-replica baseline through the same proxy). */
  readonly httpOne: number;
  readonly grpcOne: number;
}

export function haproxyAvailable(): boolean {
  return spawnSync('haproxy', ['-v'], { stdio: 'ignore' }).status === 0;
}

/**
 * Debian's haproxy in front of the replicas, as a Kubernetes Service or ingress would be:
 * least-connections balancing, health checks on /v2/health/ready every 500 ms (a draining
 * replica answers 503 and leaves the rotation), HTTP/1.1 and h2c gRPC frontends.
 */
export function haproxyConfig(replicas: readonly Replica[], ports: HaproxyPorts): string {
  const servers = (kind: 'http' | 'grpc', only?: number) =>
    replicas
      .slice(0, only)
      .map(
        (r) =>
          `  server ${r.name} 127.0.0.1:${kind === 'http' ? r.httpPort : r.grpcPort}${kind === 'grpc' ? ' proto h2 check-proto h1' : ''} check port ${r.httpPort} inter 500 fall 1 rise 2`,
      )
      .join('\n');
  const backend = (name: string, kind: 'http' | 'grpc', only?: number) => `
backend ${name}
  balance leastconn
  # HTTP/1.1 with a Host header: Kiln refuses requests whose Host it does not serve.
  option httpchk
  http-check send meth GET uri /v2/health/ready ver HTTP/1.1 hdr Host localhost
  http-check expect status 200
  retries 2
  option redispatch
${servers(kind, only)}
`;
  return `global
  maxconn 1024

defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  option http-keep-alive

frontend http_all
  bind 127.0.0.1:${ports.http}
  default_backend http_all
frontend grpc_all
  bind 127.0.0.1:${ports.grpc} proto h2
  default_backend grpc_all
frontend http_one
  bind 127.0.0.1:${ports.httpOne}
  default_backend http_one
frontend grpc_one
  bind 127.0.0.1:${ports.grpcOne} proto h2
  default_backend grpc_one
${backend('http_all', 'http')}${backend('grpc_all', 'grpc')}${backend('http_one', 'http', 1)}${backend('grpc_one', 'grpc', 1)}`;
}

export async function startHaproxy(dir: string, config: string): Promise<ChildProcess> {
  const file = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(file, config);
  const check = spawnSync('haproxy', ['-c', '-f', file], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`haproxy config: ${check.stdout}${check.stderr}`);
  const child = spawn('haproxy', ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  if (child.exitCode !== null) throw new Error(`haproxy exited with ${child.exitCode}`);
  return child;
}
