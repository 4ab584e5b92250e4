import cluster from 'node:cluster';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { ListenerInfo } from '../kiln-server.js';
import { aggregatorRegistry } from '../metrics/prom-client-parts.js';
import type { ModelManager } from '../models/model-manager.js';
import {
  type IngressMessage,
  type IngressStart,
  IpcRequests,
  isIngressMessage,
  replyTo,
} from './ingress-messages.js';
import { type ManagementOp, type ManagementResult, applyManagementOp } from './management-ops.js';

/** The environment variable that tells an ingress process its place (0, 1, …). */
export const INGRESS_INDEX_ENV = 'KILN_INGRESS_INDEX';
/**
 * The management token from the primary: read and removed at once, so that nothing this
 * process starts (engine workers, a model's Python handler) inherits it.
 */
export const INGRESS_TOKEN_ENV = 'KILN_INGRESS_MANAGEMENT_TOKEN';

/** The listeners' addresses as the first ingress process bound them (JSON of ListenerInfo). */
export const INGRESS_BOUND_ENV = 'KILN_INGRESS_BOUND_LISTENERS';

/** How long the primary waits for one process's metrics, ms. */
export const METRICS_TIMEOUT_MS = 5_000;

/** What an ingress process answers the primary with. */
export interface IngressLocal {
  readonly models: ModelManager;
  /** This process's metrics (gauges sampled first), as prom-client JSON. */
  metricsJson(): Promise<object[]>;
}

/**
 * One ingress process's side of `ingress_processes`: management calls go through the primary,
 * which applies them in every process in one order; metrics are gathered from every process
 * and summed (prom-client's cluster aggregation).
 */
export class IngressPeer {
  private readonly requests = new IpcRequests((message) => this.send(message));
  private local: IngressLocal | undefined;
  private stopHandler: (() => void) | undefined;
  private stopAsked = false;

  private constructor(
    readonly index: number,
    /** The token the primary gave every process; undefined with authorization off. */
    readonly managementToken: string | undefined,
    /** Where the first process listens, for a process started after it (see withBoundPorts). */
    readonly boundListeners: ListenerInfo | undefined,
  ) {
    process.on('message', (message: unknown) => {
      if (isIngressMessage(message)) void this.onMessage(message);
    });
    process.on('disconnect', () => this.requests.failAll('the primary process is gone'));
  }

  /** The peer of this process when a primary started it as an ingress process, else undefined. */
  static ofThisProcess(): IngressPeer | undefined {
    const index = process.env[INGRESS_INDEX_ENV];
    if (!cluster.isWorker || index === undefined || !process.send) return undefined;
    const token = process.env[INGRESS_TOKEN_ENV];
    delete process.env[INGRESS_TOKEN_ENV];
    const bound = process.env[INGRESS_BOUND_ENV];
    delete process.env[INGRESS_BOUND_ENV];
    return new IngressPeer(
      Number(index),
      token,
      bound ? (JSON.parse(bound) as ListenerInfo) : undefined,
    );
  }

  /** Called by the server once its models and metrics exist. */
  attach(local: IngressLocal): void {
    this.local = local;
  }

  /** What to do when the primary says stop (drain, then exit). */
  onStop(handler: () => void): void {
    this.stopHandler = handler;
    if (this.stopAsked) handler();
  }

  listening(urls: ListenerInfo): void {
    this.send({ kiln: 'listening', urls });
  }

  /** Resolves once this process has caught up with the management calls of the others. */
  ready(): Promise<IngressStart> {
    return this.requests.request<IngressStart>({ kiln: 'ready' });
  }

  /** Applies a management call in every ingress process; answers with this process's result. */
  manage(op: ManagementOp): Promise<ManagementResult> {
    return this.requests.request<ManagementResult>({ kiln: 'manage', op });
  }

  /** Every ingress process's metrics, aggregated, in Prometheus' text format. */
  async metricsText(): Promise<{ contentType: string; body: string }> {
    const all = await this.requests.request<object[][]>(
      { kiln: 'gather-metrics' },
      2 * METRICS_TIMEOUT_MS,
    );
    const registry = aggregatorRegistry().aggregate(all);
    return { contentType: registry.contentType, body: await registry.metrics() };
  }

  private async onMessage(message: IngressMessage): Promise<void> {
    if (this.requests.settle(message)) return;
    switch (message.kiln) {
      case 'apply':
        this.reply(
          await replyTo(message.id, () =>
            applyManagementOp(this.attached().models, message.op, {
              following: message.following,
              inEveryProcess: true,
            }),
          ),
        );
        return;
      case 'metrics-json':
        this.reply(await replyTo(message.id, () => this.attached().metricsJson()));
        return;
      case 'stop':
        this.stopAsked = true;
        this.stopHandler?.();
        return;
      default:
        return;
    }
  }

  private attached(): IngressLocal {
    if (!this.local)
      throw new KilnError(KilnErrorCode.ModelNotReady, 'this ingress process is still starting');
    return this.local;
  }

  /** A reply to a primary that is gone has nobody to read it (this process exits with it). */
  private reply(message: IngressMessage): void {
    if (process.connected) process.send!(message);
  }

  private send(message: IngressMessage): void {
    if (!process.connected) throw new Error('the primary process is gone');
    process.send!(message);
  }
}
