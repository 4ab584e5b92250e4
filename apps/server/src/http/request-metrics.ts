import type { Middleware } from 'koa';
import type { ServerMetrics } from '../metrics/server-metrics.js';

/** The model label of requests naming no registered model: one series, however many names. */
export const UNKNOWN_MODEL_LABEL = '_unknown';

/**
 * Counts requests by status and times them, labelled by the matched route pattern and the
 * model; names that are not registered share one label, so clients cannot grow the series.
 */
export function requestMetrics(
  metrics: ServerMetrics,
  api: string,
  isRegistered: (model: string) => boolean,
): Middleware {
  return async (ctx, next) => {
    const start = performance.now();
    try {
      await next();
    } finally {
      const route =
        (ctx as { routerPath?: string; _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      const named = typeof ctx.state.model === 'string' ? ctx.state.model : '';
      recordRequest(metrics, { api, route, model: named, status: ctx.status, start }, isRegistered);
    }
  };
}

/** Counts and times one answered request (`start`: its `performance.now()` on arrival). */
export function recordRequest(
  metrics: ServerMetrics,
  request: { api: string; route: string; model: string; status: number; start: number },
  isRegistered: (model: string) => boolean,
): void {
  const { api, route, model: named } = request;
  const model = named === '' || isRegistered(named) ? named : UNKNOWN_MODEL_LABEL;
  metrics.requests.inc({ api, route, model, status: String(request.status) });
  metrics.requestSeconds.observe({ api, route, model }, (performance.now() - request.start) / 1000);
}
