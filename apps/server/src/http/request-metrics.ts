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
    const end = performance.now();
    try {
      await next();
    } finally {
      const route =
        (ctx as { routerPath?: string; _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      const named = typeof ctx.state.model === 'string' ? ctx.state.model : '';
      const model = named === '' || isRegistered(named) ? named : UNKNOWN_MODEL_LABEL;
      metrics.requests.inc({ api, route, model, status: String(ctx.status) });
      metrics.requestSeconds.observe({ api, route, model }, (performance.now() - end) / 1000);
    }
  };
}
