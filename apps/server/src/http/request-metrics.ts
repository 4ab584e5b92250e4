import type { Middleware } from 'koa';
import type { ServerMetrics } from '../metrics/server-metrics.js';

/** Counts requests by status and times them, labelled by the matched route pattern. */
export function requestMetrics(metrics: ServerMetrics, api: string): Middleware {
  return async (ctx, next) => {
    const end = performance.now();
    try {
      await next();
    } finally {
      const route =
        (ctx as { routerPath?: string; _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      const model = typeof ctx.state.model === 'string' ? ctx.state.model : '';
      metrics.requests.inc({ api, route, model, status: String(ctx.status) });
      metrics.requestSeconds.observe({ api, route, model }, (performance.now() - end) / 1000);
    }
  };
}
