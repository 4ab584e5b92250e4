import type { Logger } from 'pino';
import type { ServerConfig } from '../config/server-config.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import type { ModelManager } from '../models/model-manager.js';
import type { BodyLimits } from '../http/read-body.js';
import type { ManagementOp, ManagementResult } from '../cluster/management-ops.js';

/** What every route needs. */
export interface ServerContext {
  readonly config: ServerConfig;
  readonly models: ModelManager;
  readonly metrics: ServerMetrics;
  readonly log: Logger;
  readonly version: string;
  /** False once SIGTERM arrived: new predictions are refused while accepted ones finish. */
  accepting: boolean;
  /** False until every model named at start is registered: before that, readiness says no. */
  startupRegistered: boolean;
  /** Applies a management call that changes what is served (in every ingress process). */
  manage(op: ManagementOp): Promise<ManagementResult>;
}

export function bodyLimits(server: ServerContext): BodyLimits {
  return {
    maxBytes: server.config.maxRequestSize,
    timeoutMs: server.config.requestTimeoutMs,
    idleTimeoutMs: server.config.clientBodyTimeoutMs,
  };
}
