import { KilnError, KilnErrorCode } from '@kiln/core';

/**
 * Which `Host` and `Origin` values a listener accepts. DNS rebinding reaches a loopback
 * listener under a foreign host name; a cross-site page announces itself with `Origin`.
 */
export interface HostPolicy {
  /** Lower-case host names (without port) accepted in `Host`; `*` accepts any. */
  readonly hosts: ReadonlySet<string>;
  /** Exact origins (`https://app.example:8443`) accepted besides the listener's own hosts. */
  readonly origins: ReadonlySet<string>;
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];
const WILDCARD_BINDS = new Set(['0.0.0.0', '::', '']);

/**
 * The hosts a listener bound to `bindHost` answers to: the configured list when there is one;
 * else loopback names plus the bound address, or any host for a wildcard bind (a cluster
 * reaches it under names the server cannot know; the token and Origin checks still apply).
 */
export function hostPolicy(
  bindHost: string,
  allowedHosts: readonly string[],
  allowedOrigins: readonly string[],
): HostPolicy {
  const hosts = new Set<string>();
  if (allowedHosts.length > 0) {
    for (const host of allowedHosts) hosts.add(normalizeHost(host));
  } else if (WILDCARD_BINDS.has(bindHost)) {
    hosts.add('*');
  } else {
    for (const host of [...LOOPBACK_NAMES, bindHost]) hosts.add(normalizeHost(host));
  }
  return { hosts, origins: new Set(allowedOrigins.map((o) => o.toLowerCase())) };
}

/** `[::1]:8080` → `::1`; `Example.com:80` → `example.com`. */
function normalizeHost(host: string): string {
  const lower = host.trim().toLowerCase();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(lower);
  if (bracketed) return bracketed[1]!;
  // A bare IPv6 address has several colons; a name or IPv4 with a port has one.
  if ((lower.match(/:/g) ?? []).length === 1) return lower.slice(0, lower.indexOf(':'));
  return lower;
}

/** Throws 403 unless `Host` names this listener and `Origin`, when sent, is one of its own. */
export function checkHostAndOrigin(
  policy: HostPolicy,
  host: string | undefined,
  origin: string | undefined,
): void {
  const hostName = host === undefined ? undefined : normalizeHost(host);
  if (!policy.hosts.has('*') && (hostName === undefined || !policy.hosts.has(hostName))) {
    throw new KilnError(
      KilnErrorCode.Forbidden,
      'the Host header names no host this server serves',
    );
  }
  if (origin === undefined || policy.origins.has(origin.toLowerCase())) return;
  // Same-origin requests (the page was served by this very host) are the only others accepted.
  let originHost: string;
  try {
    originHost = new URL(origin).host.toLowerCase();
  } catch {
    throw new KilnError(KilnErrorCode.Forbidden, 'cross-origin requests are not accepted');
  }
  if (host === undefined || originHost !== host.trim().toLowerCase() || hostName === undefined) {
    throw new KilnError(KilnErrorCode.Forbidden, 'cross-origin requests are not accepted');
  }
  if (!policy.hosts.has('*') && !policy.hosts.has(hostName)) {
    throw new KilnError(KilnErrorCode.Forbidden, 'cross-origin requests are not accepted');
  }
}
