import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { haproxyAvailable } from './haproxy.js';

const RUN = fileURLToPath(new URL('./run.ts', import.meta.url));
const available = haproxyAvailable();
if (!available)
  console.warn('skipping the scale-out check: haproxy is not installed (Debian haproxy)');

describe.runIf(available)('scale-out behind haproxy', () => {
  it('loses no request when a replica drains (SIGTERM) or dies (SIGKILL) mid-run', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '-C',
        '@kiln/source',
        '--import',
        'tsx',
        RUN,
        '--seconds',
        '1',
        '--rounds',
        '1',
        '--kill-seconds',
        '6',
        '--concurrency',
        '4',
        '--port',
        '18750',
      ],
      { timeout: 170_000 },
    );
    expect(stdout).toMatch(/2 replicas\s+[\d.]+ \[/);
    expect(stdout).toMatch(/2 ÷ 1: [\d.]+ \[/);
    for (const signal of ['SIGTERM', 'SIGKILL']) {
      const pass = stdout.slice(stdout.indexOf(`with ${signal}`));
      expect(pass, stdout).toMatch(
        /HTTP: [1-9]\d* right answers \(\d+ after a client retry\), 0 wrong, 0 failed/,
      );
      expect(pass, stdout).toMatch(
        /gRPC: [1-9]\d* right answers \(\d+ after a client retry\), 0 wrong, 0 failed/,
      );
      expect(pass, stdout).toMatch(/no request lost silently/);
    }
  }, 180_000);
});
