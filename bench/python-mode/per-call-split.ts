/** Where a Python model's calls spent their time, from the server's own `/metrics` (means). */
export async function perCallSplit(metricsUrl: string, model: string): Promise<string> {
  const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
  const meanMs = (metric: string) =>
    (1000 *
      Number(new RegExp(`${metric}_sum\\{model="${model}"\\} ([\\d.e+-]+)`).exec(metrics)?.[1])) /
    Number(new RegExp(`${metric}_count\\{model="${model}"\\} (\\d+)`).exec(metrics)?.[1]);
  return `${model}: per call ${meanMs('kiln_inference_seconds').toFixed(2)} ms forward = ${meanMs('kiln_python_handler_seconds').toFixed(2)} ms handler + ${meanMs('kiln_python_ipc_seconds').toFixed(2)} ms IPC; queue ${meanMs('kiln_queue_seconds').toFixed(2)} ms per request`;
}
