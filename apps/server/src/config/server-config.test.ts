import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { KilnError } from '@kiln/core';
import { envKeyFor, isLoopbackHost, loadServerConfig, parseAddress } from './server-config.js';

describe('loadServerConfig', () => {
  it('defaults to loopback listeners, DJL queue defaults and adaptive batching', () => {
    const config = loadServerConfig({ env: {} });
    expect(config.inferenceAddress).toBe('http://127.0.0.1:8080');
    expect(config.managementAddress).toBe('http://127.0.0.1:8081');
    expect(config.metricsAddress).toBe('http://127.0.0.1:8082');
    expect(config.modelDefaults).toMatchObject({
      jobQueueSize: 1000,
      batchSize: undefined,
      autoBatchSize: 32,
      maxBatchDelayMs: 100,
      maxIdleTimeS: 60,
    });
    expect(
      loadServerConfig({ env: {}, overrides: { auto_batch_size: '0' } }).modelDefaults,
    ).toMatchObject({ batchSize: undefined, autoBatchSize: 0 });
    expect(config.modelDefaults).toMatchObject({
      placement: 'thread',
      inlineForwardLimitUs: 400,
      workerNice: 5,
    });
    expect(loadServerConfig({ env: { KILN_WORKER_NICE: '0' } }).modelDefaults.workerNice).toBe(0);
    expect(() => loadServerConfig({ env: {}, overrides: { worker_nice: '20' } })).toThrow(
      /worker_nice=20 must be at most 19/,
    );
    expect(
      loadServerConfig({ env: {}, overrides: { placement: 'inline' } }).modelDefaults.placement,
    ).toBe('inline');
    expect(() => loadServerConfig({ env: {}, overrides: { placement: 'gpu' } })).toThrow(
      /placement=gpu must be one of auto, thread, inline/,
    );
    expect(config.overloadStatus).toBe(503);
    expect(config.modelStore).toBeUndefined();
    expect(config.eventLoopTurnBudgetMs).toBe(1);
    expect(
      loadServerConfig({ env: { KILN_EVENT_LOOP_TURN_BUDGET_MS: '0' } }).eventLoopTurnBudgetMs,
    ).toBe(0);
  });

  it('serves from one process unless ingress_processes asks for more (at most 4 per core)', () => {
    expect(loadServerConfig({ env: {} }).ingressProcesses).toBe(1);
    expect(loadServerConfig({ env: { KILN_INGRESS_PROCESSES: '2' } }).ingressProcesses).toBe(2);
    expect(() => loadServerConfig({ env: {}, overrides: { ingress_processes: '0' } })).toThrow(
      /ingress_processes=0 must be an integer ≥ 1/,
    );
    const tooMany = String(4 * os.availableParallelism() + 1);
    expect(() => loadServerConfig({ env: {}, overrides: { ingress_processes: tooMany } })).toThrow(
      /more than 4 per core/,
    );
  });

  it('layers defaults < file < KILN_* environment < overrides', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-config-'));
    const file = path.join(dir, 'config.properties');
    fs.writeFileSync(
      file,
      'batch_size=4\nmax_batch_delay=20\nmodel_store=store\noverload_status=429\n',
    );
    const config = loadServerConfig({
      file,
      env: { [envKeyFor('max_batch_delay')]: '30', KILN_JOB_QUEUE_SIZE: '7' },
      overrides: { job_queue_size: '9' },
    });
    expect(config.modelDefaults).toMatchObject({
      batchSize: 4,
      maxBatchDelayMs: 30,
      jobQueueSize: 9,
    });
    expect(config.modelStore).toBe(path.join(dir, 'store'));
    expect(config.overloadStatus).toBe(429);
    fs.rmSync(dir, { recursive: true });
  });

  it.each([
    [{ overload_status: '500' }, /503 or 429/],
    [{ batch_size: '0' }, /batch_size/],
    [{ max_request_size: 'lots' }, /max_request_size/],
    [{ max_prompt_bytes: '0' }, /max_prompt_bytes/],
    [{ inference_address: 'https://0.0.0.0:8443' }, /only http/],
    [{ metrics_address: 'not a url' }, /not a URL/],
  ])('refuses %o with INVALID_CONFIG', (overrides, message) => {
    const attempt = () => loadServerConfig({ env: {}, overrides });
    expect(attempt).toThrow(KilnError);
    expect(attempt).toThrow(message);
  });

  it('takes true or false for a switch, in any case, and refuses anything else', () => {
    const config = loadServerConfig({
      env: { KILN_DISABLE_TOKEN_AUTHORIZATION: 'TRUE' },
      overrides: { enable_access_log: ' False' },
    });
    expect(config).toMatchObject({ disableTokenAuthorization: true, accessLog: false });
    expect(() => loadServerConfig({ env: {}, overrides: { enable_access_log: 'no' } })).toThrow(
      /enable_access_log=no is not one of true, false/,
    );
  });

  it('warns about unknown keys in the file, naming the closest known key', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-config-'));
    const file = path.join(dir, 'config.properties');
    fs.writeFileSync(
      file,
      'inference_adress=http://127.0.0.1:1\nnumber_of_netty_threads=4\nbatch_size=2\nfrobnicate=1\n',
    );
    const warnings: string[] = [];
    const config = loadServerConfig({ file, env: {}, onWarning: (w) => warnings.push(w) });
    expect(config.modelDefaults.batchSize).toBe(2);
    expect(warnings).toEqual([
      `${file}: unknown key inference_adress (did you mean inference_address?)`,
      `${file}: number_of_netty_threads is not supported by Kiln, ignored: Kiln serves HTTP on Node’s event loop (see ingress_processes)`,
      `${file}: unknown key frobnicate: Kiln ignores it`,
    ]);
    fs.rmSync(dir, { recursive: true });
  });
});

describe('addresses', () => {
  it('parses hosts and ports, IPv6 included', () => {
    expect(parseAddress('http://127.0.0.1:8080')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(parseAddress('http://[::1]:9000')).toEqual({ host: '::1', port: 9000 });
  });

  it('knows which hosts are loopback', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1'])
      expect(isLoopbackHost(host)).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.com'])
      expect(isLoopbackHost(host)).toBe(false);
  });
});
