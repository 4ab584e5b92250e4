import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const CONTAINERS_CONF = fileURLToPath(new URL('./containers.conf', import.meta.url));
const env = { ...process.env, CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? CONTAINERS_CONF };

/** `podman --runtime runc …` (crun fails on hybrid cgroups), with Kiln's containers.conf. */
export async function podman(args: string[], timeoutMs = 120_000): Promise<string> {
  const { stdout } = await promisify(execFile)('podman', ['--runtime', 'runc', ...args], {
    env,
    timeout: timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/** The tools the image build needs, or why it cannot run here. */
export function missingTools(): string | undefined {
  const missing = ['podman', 'runc', 'mmdebstrap', 'dpkg-repack'].filter(
    (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0,
  );
  return missing.length
    ? `${missing.join(', ')} not installed (apt-get install podman runc uidmap mmdebstrap dpkg-repack)`
    : undefined;
}

/** A container's output: podman logs writes the container's stderr to its own stderr. */
export async function podmanLogs(name: string): Promise<string> {
  const { stdout, stderr } = await promisify(execFile)(
    'podman',
    ['--runtime', 'runc', 'logs', name],
    { env, maxBuffer: 64 * 1024 * 1024 },
  );
  return `${stdout}${stderr}`;
}
