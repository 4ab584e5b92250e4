import { KilnError, KilnErrorCode } from '@kiln/core';

/** `127.0.0.1:8085`, `[::1]:8085`, `0.0.0.0:8085` (a `grpc://` prefix is accepted). */
export function parseGrpcAddress(
  address: string,
  key = 'grpc_address',
): {
  host: string;
  port: number;
} {
  const match = /^(?:grpc:\/\/)?(?:\[([^\]]+)\]|([^:/[\]]+)):(\d{1,5})$/.exec(address.trim());
  const port = Number(match?.[3]);
  if (!match || port > 65535) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${key}=${address} is not an address like 127.0.0.1:8085`,
    );
  }
  return { host: match[1] ?? match[2]!, port };
}
