import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';

/** Where the management key came from, and where it was written. */
export interface ManagementKey {
  readonly token: string;
  /** The key file written for a generated key; undefined for a configured token. */
  readonly keyFile: string | undefined;
}

/**
 * The management API's bearer token, as TorchServe does since ShellTorch: a configured
 * `management_token`, or else a fresh random key written to `key_file` (JSON, mode 0600, never
 * through a symlink) for the operator and their tools to read.
 */
export function resolveManagementKey(
  configured: string | undefined,
  keyFile: string,
): ManagementKey {
  if (configured) return { token: configured, keyFile: undefined };
  const token = randomBytes(24).toString('base64url');
  writeKeyFile(keyFile, token);
  return { token, keyFile };
}

function writeKeyFile(file: string, token: string): void {
  const body = `${JSON.stringify({ management: { key: token } }, null, 2)}\n`;
  // Written beside the target, then renamed over it: rename replaces a planted link instead of
  // following it, and servers starting at the same time never see each other's half-written file.
  const temporary = path.join(
    path.dirname(file),
    `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}`,
  );
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const fd = fs.openSync(
      temporary,
      fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW,
      0o600,
    );
    try {
      fs.writeSync(fd, body);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temporary, file);
  } catch (error) {
    fs.rmSync(temporary, { force: true });
    throw KilnError.wrap(
      error,
      KilnErrorCode.InvalidConfig,
      `cannot write the management key file ${file} (set key_file, or management_token)`,
    );
  }
}
