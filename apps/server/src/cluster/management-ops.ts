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
  /** Versions removed (unregister). */
  readonly removed?: number;
}

export interface ApplyOptions {
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
      const entry = await models.register(op.request, { synchronous: op.synchronous });
      return { name: entry.name };
    }
    case 'scale':
      if (options.following) await models.get(op.name, op.version).loading;
      await models.scale(op.name, op.version, op.limits, op.synchronous);
      return {};
    case 'set-default':
      models.setDefault(op.name, op.version);
      return {};
    case 'unregister':
      return { removed: (await models.unregister(op.name, op.version)).length };
  }
}
