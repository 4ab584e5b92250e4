import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { ListenerInfo } from '../kiln-server.js';
import {
  type IngressMessage,
  type IngressStart,
  IpcRequests,
  isIngressMessage,
  replyTo,
} from './ingress-messages.js';
import {
  INGRESS_BOUND_ENV,
  INGRESS_INDEX_ENV,
  INGRESS_TOKEN_ENV,
  METRICS_TIMEOUT_MS,
} from './ingress-peer.js';
import {
  type AppliedOp,
  type ManagementOp,
  type ManagementResult,
  appendApplied,
} from './management-ops.js';

export interface IngressPrimaryOptions {
  /** How many ingress processes to run (each serves every model on the shared listeners). */
  readonly processes: number;
  readonly log: Logger;
  /** The management API's token every process takes (each would otherwise make its own). */
  readonly managementToken?: string;
  /** How long a process may drain on stop, ms (it cuts what is still open then). */
  readonly shutdownTimeoutMs: number;
  /** How long past shutdownTimeoutMs a stopping process may take before it is killed, ms. */
  readonly stopGraceMs?: number;
}

/** The primary process of `ingress_processes`: it runs no server itself. */
export interface IngressPrimary {
  /**
   * The shared listeners' addresses once the first process listens; rejects when a process
   * fails before it ever listened (bad configuration, a port taken), after the others stopped.
   */
  readonly listening: Promise<ListenerInfo>;
  /** Stops every process (each drains what it accepted) and resolves once all exited. */
  stop(): Promise<void>;
}

/** One ingress process's place: its process changes when it is replaced. */
interface Slot {
  readonly index: number;
  worker: Worker | undefined;
  requests: IpcRequests;
  /** Its process answers requests (it said ready: messages sent earlier could go unheard). */
  answering: boolean;
  /** Follows management calls: its startup models are registered and the log replayed. */
  following: boolean;
  listened: boolean;
  /** Its current process listens (it said so, and has not exited). */
  listening: boolean;
  /** Its process could not replay the calls applied so far and was stopped. */
  outOfStep: boolean;
  /** Models its process serves without: their calls failed to replay where no process had them. */
  lacking: Set<string>;
  startedAt: number;
  quickExits: number;
}

/** A process that exits within this long of its start counts towards a longer restart delay. */
const QUICK_EXIT_MS = 10_000;
const MAX_RESTART_DELAY_MS = 30_000;
const DEFAULT_STOP_GRACE_MS = 5_000;

/**
 * Forks `processes` ingress processes (Node's cluster: they share the listening sockets), keeps
 * them running and keeps them alike: a management call taken by one is applied by every one in
 * a single order, and logged, so a process that replaces a dead one replays it.
 */
export function startIngressPrimary(options: IngressPrimaryOptions): IngressPrimary {
  const { log } = options;
  const slots: Slot[] = [];
  let applied: AppliedOp[] = [];
  let queue: Promise<void> = Promise.resolve();
  /** The listeners' addresses as the first process bound them (ports on port 0 chosen). */
  let bound: ListenerInfo | undefined;
  /**
   * Processes listen on `bound`'s ports rather than on port 0. Node's cluster shares one
   * listening socket among the processes that ask for the same address — port 0 included —
   * and closes it when the last of them is gone; a process started when none listens then asks
   * for the bound ports, and from then on every process does, so that they share that socket.
   */
  let explicitPorts = false;
  let stopping: Promise<void> | undefined;
  // The first process to listen resolves it; later calls change nothing.
  let listeningResolve!: (urls: ListenerInfo) => void;
  let listeningReject!: (error: Error) => void;
  const listening = new Promise<ListenerInfo>((resolve, reject) => {
    listeningResolve = resolve;
    listeningReject = reject;
  });

  /** Management calls run one at a time, in the order they arrive, in every process. */
  const enqueue = (task: () => Promise<void>) => {
    queue = queue.then(task, task);
  };

  const apply = (slot: Slot, op: ManagementOp, following: boolean) =>
    slot.requests.request<ManagementResult>({ kiln: 'apply', op, following });

  const onManage = (origin: Slot, id: number, op: ManagementOp) =>
    enqueue(async () => {
      const worker = origin.worker;
      const reply = await replyTo(id, async () => {
        if (!origin.following)
          throw new KilnError(
            KilnErrorCode.ModelNotReady,
            'this server process is still starting; retry the call',
          );
        // A registration failing here leaves nothing behind in this process (inEveryProcess).
        const result = await apply(origin, op, false);
        const name = result.name ?? nameOf(op);
        const followers = slots.filter((s) => s !== origin && s.following);
        const outcomes = await Promise.allSettled(followers.map((s) => apply(s, op, true)));
        const failed = outcomes.findIndex((outcome) => outcome.status === 'rejected');
        if (failed < 0) {
          applied = appendApplied(applied, { op, name });
          // Registered everywhere now, by a call that followed the ones that failed to replay.
          if (op.kind === 'register') for (const s of slots) s.lacking.delete(name);
          return result;
        }
        const follower = followers[failed]!;
        const error = KilnError.wrap(
          (outcomes[failed] as PromiseRejectedResult).reason,
          KilnErrorCode.Internal,
        );
        log.error(
          { ingress: follower.index, op: op.kind, error: error.message },
          'an ingress process could not follow a management call',
        );
        if (op.kind === 'register') {
          // Served by some processes only, the model would answer 404 or 503 to every other
          // request: it is removed from those that registered it, and the call fails.
          const registered = followers.filter((_, i) => outcomes[i]!.status === 'fulfilled');
          await undoRegistration([origin, ...registered], result);
        } else {
          // The processes that applied it keep it; one replacing a process replays it.
          applied = appendApplied(applied, { op, name });
        }
        throw new KilnError(error.code, `ingress process ${follower.index}: ${error.message}`, {
          ...(error.details ? { details: error.details } : {}),
        });
      });
      sendTo(worker, reply);
    });

  const undoRegistration = (where: readonly Slot[], registered: ManagementResult) =>
    Promise.all(
      where.map((slot) =>
        apply(
          slot,
          { kind: 'unregister', name: registered.name ?? '', version: registered.version },
          true,
        ).catch((error: unknown) =>
          log.warn(
            { ingress: slot.index, error: messageOf(error) },
            'an ingress process could not undo a registration',
          ),
        ),
      ),
    );

  /**
   * A new process replays every call applied so far, before it listens, then follows new ones:
   * a process that replaces a dead one never answers for models it has not registered yet.
   */
  const onReady = (slot: Slot, id: number) =>
    enqueue(async () => {
      const worker = slot.worker;
      for (const { op, name } of applied) {
        if (slot.worker !== worker) return;
        try {
          await apply(slot, op, true);
        } catch (error) {
          const served = slots.some((s) => s !== slot && s.following && !s.lacking.has(name));
          if (!served) {
            // No process serves the model (a server whose every process was replaced, with the
            // model gone from disk): this one serves what it can, as the others do.
            log.warn(
              { ingress: slot.index, op: op.kind, model: name, error: messageOf(error) },
              'an ingress process could not replay a management call',
            );
            slot.lacking.add(name);
            continue;
          }
          // Listening without what the others serve, it would answer 404 to its share of those
          // requests: it stops before it listens and another is started (with the usual delay).
          log.error(
            { ingress: slot.index, op: op.kind, model: name, error: messageOf(error) },
            'an ingress process could not replay a management call; starting another',
          );
          slot.outOfStep = true;
          worker?.process.kill('SIGTERM');
          return;
        }
      }
      if (slot.worker !== worker || !worker?.isConnected()) return;
      const othersServe = slots.some((s) => s !== slot && s.following);
      slot.following = true;
      sendTo(worker, { kiln: 'reply', id, value: { othersServe } satisfies IngressStart });
    });

  const onGatherMetrics = async (origin: Slot, id: number) => {
    const reply = await replyTo(id, async () => {
      const all = await Promise.all(
        slots
          .filter((s) => s.answering)
          .map((s) =>
            s.requests
              .request<unknown[]>({ kiln: 'metrics-json' }, METRICS_TIMEOUT_MS)
              .catch(() => undefined),
          ),
      );
      return all.filter((json) => json !== undefined);
    });
    sendTo(origin.worker, reply);
  };

  const onMessage = (slot: Slot, message: IngressMessage) => {
    if (slot.requests.settle(message)) return;
    switch (message.kiln) {
      case 'listening':
        slot.listened = true;
        slot.listening = true;
        bound ??= message.urls;
        listeningResolve(message.urls);
        return;
      case 'ready':
        slot.answering = true;
        onReady(slot, message.id);
        return;
      case 'manage':
        onManage(slot, message.id, message.op);
        return;
      case 'gather-metrics':
        void onGatherMetrics(slot, message.id);
        return;
      default:
        return;
    }
  };

  const fork = (slot: Slot) => {
    if (bound && !slots.some((s) => s.listening)) explicitPorts = true;
    const worker = cluster.fork({
      [INGRESS_INDEX_ENV]: String(slot.index),
      ...(options.managementToken ? { [INGRESS_TOKEN_ENV]: options.managementToken } : {}),
      ...(bound && explicitPorts ? { [INGRESS_BOUND_ENV]: JSON.stringify(bound) } : {}),
    });
    slot.worker = worker;
    slot.requests = new IpcRequests((message) => {
      if (!sendTo(worker, message)) throw new Error(`ingress process ${slot.index} is gone`);
    });
    // A send racing the process's exit fails with an 'error' event, which unheard would end
    // this process: the exit itself is handled below.
    worker.on('error', (error: unknown) =>
      log.debug({ ingress: slot.index, error: messageOf(error) }, 'ingress channel error'),
    );
    slot.answering = false;
    slot.following = false;
    slot.outOfStep = false;
    slot.lacking = new Set();
    slot.startedAt = Date.now();
    worker.on('message', (message: unknown) => {
      if (isIngressMessage(message)) onMessage(slot, message);
    });
    worker.on('exit', (code, signal) => onExit(slot, worker, code, signal));
    log.info({ ingress: slot.index, processId: worker.process.pid }, 'ingress process started');
  };

  const onExit = (slot: Slot, worker: Worker, code: number | null, signal: string | null) => {
    if (slot.worker !== worker) return;
    slot.requests.failAll(`ingress process ${slot.index} exited`);
    slot.worker = undefined;
    slot.listening = false;
    slot.answering = false;
    slot.following = false;
    if (stopping) return;
    if (!slot.listened && !slot.outOfStep) {
      // It never served: a configuration the others fail on too, so the server does not start.
      log.error({ ingress: slot.index, code, signal }, 'ingress process exited while starting');
      void stop().then(() =>
        listeningReject(
          new KilnError(
            KilnErrorCode.InvalidConfig,
            `ingress process ${slot.index} exited while starting (code ${code ?? signal})`,
          ),
        ),
      );
      return;
    }
    slot.quickExits = Date.now() - slot.startedAt < QUICK_EXIT_MS ? slot.quickExits + 1 : 0;
    const delay = Math.min(MAX_RESTART_DELAY_MS, 100 * 2 ** slot.quickExits);
    log.error(
      { ingress: slot.index, code, signal, restartInMs: delay },
      'ingress process exited; starting another',
    );
    // Not unref'd: with every process gone at once, this timer is what keeps the server alive.
    setTimeout(() => {
      if (!stopping) fork(slot);
    }, delay);
  };

  const stop = () =>
    (stopping ??= (async () => {
      await Promise.all(
        slots.map(async (slot) => {
          const worker = slot.worker;
          if (!worker) return;
          const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
          // A process still starting may not hear messages yet; it has accepted nothing either.
          if (!slot.answering || !sendTo(worker, { kiln: 'stop' })) worker.process.kill('SIGTERM');
          const timer = setTimeout(
            () => worker.process.kill('SIGKILL'),
            options.shutdownTimeoutMs + (options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS),
          );
          await exited;
          clearTimeout(timer);
        }),
      );
    })());

  for (let index = 0; index < options.processes; index++) {
    const slot: Slot = {
      index,
      worker: undefined,
      requests: new IpcRequests(() => undefined),
      answering: false,
      following: false,
      listened: false,
      listening: false,
      outOfStep: false,
      lacking: new Set(),
      startedAt: 0,
      quickExits: 0,
    };
    slots.push(slot);
    fork(slot);
  }
  return { listening, stop };
}

/** Sends if the process's channel is open; false when it is not. */
function sendTo(worker: Worker | undefined, message: IngressMessage): boolean {
  if (!worker?.isConnected()) return false;
  worker.send(message);
  return true;
}

function nameOf(op: ManagementOp): string {
  return op.kind === 'register' ? (op.request.name ?? '') : op.name;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
