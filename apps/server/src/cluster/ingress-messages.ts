import { KilnError, KilnErrorCode, type SerializedKilnError } from '@kiln/core';
import type { ListenerInfo } from '../kiln-server.js';
import type { ManagementOp } from './management-ops.js';

/**
 * Messages between the primary process of `ingress_processes` and its ingress processes, over
 * Node's IPC channel. Requests carry an id their reply names; every message has a `kiln` tag,
 * so that other users of the channel (prom-client's cluster support) are left alone.
 */
export type IngressMessage =
  /** Ingress → primary: its listeners are bound. */
  | { readonly kiln: 'listening'; readonly urls: ListenerInfo }
  /**
   * Ingress → primary, before it listens: the models named at start are registered; the reply
   * comes once it has replayed the management calls applied so far, and it follows the next.
   */
  | { readonly kiln: 'ready'; readonly id: number }
  /** Ingress → primary: a management call to apply in every process, in order. */
  | { readonly kiln: 'manage'; readonly id: number; readonly op: ManagementOp }
  /** Ingress → primary: every process's metrics, as prom-client JSON. */
  | { readonly kiln: 'gather-metrics'; readonly id: number }
  /** Primary → ingress: apply a management call (`following` when another process took it). */
  | {
      readonly kiln: 'apply';
      readonly id: number;
      readonly op: ManagementOp;
      readonly following: boolean;
    }
  /** Primary → ingress: this process's metrics, as prom-client JSON. */
  | { readonly kiln: 'metrics-json'; readonly id: number }
  /** Primary → ingress: stop accepting, answer what was accepted, exit. */
  | { readonly kiln: 'stop' }
  /** Either way: the answer to a request. */
  | {
      readonly kiln: 'reply';
      readonly id: number;
      readonly value?: unknown;
      readonly error?: SerializedKilnError;
    };

/** The primary's answer to `ready`. */
export interface IngressStart {
  /**
   * Another process got here first (at start, or this one replaces one that died): this one
   * listens once its models are loaded, so that it never answers "still loading" for what the
   * other serves. Only the first process listens while its models load, as one server does.
   */
  readonly othersServe: boolean;
}

export function isIngressMessage(value: unknown): value is IngressMessage {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { kiln?: unknown }).kiln === 'string'
  );
}

/** Requests one way over an IPC channel, matched with their replies by id. */
export class IpcRequests {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: KilnError) => void }
  >();

  constructor(private readonly send: (message: IngressMessage) => void) {}

  request<T>(
    message:
      | { kiln: 'ready' }
      | { kiln: 'manage'; op: ManagementOp }
      | { kiln: 'gather-metrics' }
      | { kiln: 'apply'; op: ManagementOp; following: boolean }
      | { kiln: 'metrics-json' },
    timeoutMs?: number,
  ): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              this.pending.delete(id);
              reject(new KilnError(KilnErrorCode.Timeout, `no answer within ${timeoutMs} ms`));
            }, timeoutMs);
      this.pending.set(id, {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value as T);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      try {
        this.send({ ...message, id } as IngressMessage);
      } catch (error) {
        this.pending.delete(id);
        reject(KilnError.wrap(error, KilnErrorCode.Internal, 'ingress process unreachable'));
      }
    });
  }

  /** Settles the request a reply answers; false when the reply is not one of ours. */
  settle(message: IngressMessage): boolean {
    if (message.kiln !== 'reply') return false;
    const waiting = this.pending.get(message.id);
    if (!waiting) return false;
    this.pending.delete(message.id);
    if (message.error) waiting.reject(KilnError.fromJSON(message.error));
    else waiting.resolve(message.value);
    return true;
  }

  /** Fails every request still waiting (the other side is gone). */
  failAll(reason: string): void {
    for (const { reject } of this.pending.values())
      reject(new KilnError(KilnErrorCode.Internal, reason));
    this.pending.clear();
  }
}

/** The reply to `request`: its value, or its error as a KilnError's plain form. */
export async function replyTo(id: number, answer: () => Promise<unknown>): Promise<IngressMessage> {
  try {
    return { kiln: 'reply', id, value: await answer() };
  } catch (error) {
    const failure = KilnError.wrap(error, KilnErrorCode.Internal);
    return { kiln: 'reply', id, error: failure.toJSON() };
  }
}
