import type { ModelManager, RegisterRequest } from '../models/model-manager.js';

/**
 * A management call that changes what a server serves, as plain data: one process applies it
 * directly; with several ingress processes every process applies the same calls in the same
 * order.
 */
export type ManagementOp =
  | { readonly kind: 'register'; readonly request: RegisterRequest; readonly synchronous: boolean }
  | {
      readonly kind: 'scale';
      readonly name: string;
      readonly version: string | undefined;
      readonly limits: { readonly minWorkers?: number; readonly maxWorkers?: number };
      readonly synchronous: boolean;
    }
  | { readonly kind: 'set-default'; readonly name: string; readonly version: string }
  | { readonly kind: 'unregister'; readonly name: string; readonly version: string | undefined };

/** What the management API answers with. */
export interface ManagementResult {
  /** The registered model's name (register). */
  readonly name?: string;
  /** The registered version (register): what undoing the registration removes. */
  readonly version?: string;
  /** Versions removed (unregister). */
  readonly removed?: number;
}

export interface ApplyOptions {
  /**
   * Set when every ingress process applies the call: a registration whose model fails to load
   * leaves nothing behind, so that the processes stay alike (the primary undoes it in the
   * others).
   */
  readonly inEveryProcess?: boolean;
  /**
   * Set for a process that follows another's call: it waits for a model it is asked to scale
   * to finish loading (the process that took the call saw it READY; this one may still load it).
   */
  readonly following?: boolean;
}

export async function applyManagementOp(
  models: ModelManager,
  op: ManagementOp,
  options: ApplyOptions = {},
): Promise<ManagementResult> {
  switch (op.kind) {
    case 'register': {
      const entry = await models.register(op.request, {
        synchronous: op.synchronous,
        keepFailed: !options.inEveryProcess,
      });
      return { name: entry.name, version: entry.version };
    }
    case 'scale':
      if (options.following) await models.get(op.name, op.version).loading;
      await models.scale(op.name, op.version, op.limits, op.synchronous);
      return {};
    case 'set-default':
      models.setDefault(op.name, op.version);
      return {};
    case 'unregister':
      // A process following (or replaying) the call may never have had what it removes.
      if (options.following && !models.has(op.name)) return { removed: 0 };
      return { removed: (await models.unregister(op.name, op.version)).length };
  }
}

/** A management call applied by every process, with the model name it turned out to concern. */
export interface AppliedOp {
  readonly op: ManagementOp;
  /** The model's name (a registration's name is known once it is applied). */
  readonly name: string;
}

/**
 * The calls a process starting now must replay to serve what the others serve, `next` added:
 * calls the new one makes moot are dropped, so that a server scaled or re-registered all day
 * keeps a short log. (A model named at start is registered by every process itself, so an
 * unregistration of it stays.)
 */
export function appendApplied(log: readonly AppliedOp[], next: AppliedOp): AppliedOp[] {
  const { op } = next;
  const moot = (earlier: AppliedOp): boolean => {
    if (earlier.name !== next.name) return false;
    switch (op.kind) {
      case 'unregister':
        // Everything about the whole model, or about this version (registrations of a version
        // only known after inspection stay).
        return (
          op.version === undefined ||
          ((earlier.op.kind === 'scale' || earlier.op.kind === 'set-default') &&
            earlier.op.version === op.version)
        );
      case 'scale':
        return (
          earlier.op.kind === 'scale' &&
          earlier.op.version === op.version &&
          op.limits.minWorkers !== undefined &&
          op.limits.maxWorkers !== undefined
        );
      case 'set-default':
        return earlier.op.kind === 'set-default';
      case 'register':
        return false;
    }
  };
  return [...log.filter((earlier) => !moot(earlier)), next];
}
