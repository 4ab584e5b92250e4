import type { SettingDeclaration } from '@kiln/core';

const SECONDS = { type: 'number', min: 0 } as const;

/**
 * The `option.*` keys Python mode reads itself (DJL's names). Every other key reaches the
 * handler among its properties, so only a near miss of one of these is warned about.
 */
export const PYTHON_OPTIONS: readonly SettingDeclaration[] = [
  { key: 'pythonExecutable', type: 'string', default: '/usr/bin/python3', doc: 'interpreter' },
  { key: 'entryPoint', type: 'string', default: 'model.py', doc: '.py file or module name' },
  {
    key: 'handler',
    type: 'string',
    default: 'handle',
    doc: 'function called per batch (with rolling_batch: the step handler, default StepHandler)',
  },
  { key: 'model_loading_timeout', ...SECONDS, default: '240', doc: 's for the handler to load' },
  { key: 'predict_timeout', ...SECONDS, default: '120', doc: 's per prediction' },
  { key: 'enable_venv', type: 'boolean', default: 'false', doc: 'install requirements.txt' },
  { key: 'venv_dir', type: 'string', default: '<tmpdir>/kiln-venvs', doc: 'where venvs are made' },
  { key: 'env', type: 'list', doc: "KEY=VALUE pairs added to the workers' environment" },
  { key: 'sharedMemory', type: 'boolean', default: 'true', doc: 'large contents in shared memory' },
  {
    key: 'max_response_size',
    type: 'integer',
    min: 1,
    default: "the server's max_response_size",
    doc: "bytes one request's answer may hold",
  },
  {
    key: 'max_worker_rss_mb',
    type: 'integer',
    min: 0,
    default: "the server's max_worker_rss_mb",
    doc: 'a worker past this resident memory is replaced after its call (0: no limit)',
  },
  {
    key: 'allocator',
    type: 'choice',
    values: ['jemalloc', 'tcmalloc', 'default'],
    default: "the server's (cpu_launcher_args), else default",
    doc: "workers' malloc: jemalloc (libjemalloc2) or tcmalloc (libtcmalloc-minimal4) preloaded, or glibc's",
  },
];
