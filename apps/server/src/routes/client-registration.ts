import { formatModelUrl, parseModelUrl } from '@kiln/core';
import type { ManagementResult } from '../cluster/management-ops.js';
import type { RegisterRequest } from '../models/model-manager.js';
import { checkModelLocation } from '../security/url-allowlist.js';
import type { ServerContext } from './server-context.js';

/** What a client may choose about a model it registers, besides where it comes from. */
export type ClientModelSettings = Omit<RegisterRequest, 'url' | 'root'>;

/**
 * Registers a model from a location a client gave (the management API, the v2 repository
 * extension). Only the model store and allowed_urls are reachable this way (ShellTorch,
 * CVE-2023-43654); the operator's own command line is trusted and does not come through here.
 */
export async function registerClientModel(
  server: ServerContext,
  url: string,
  settings: ClientModelSettings,
  synchronous: boolean,
): Promise<ManagementResult> {
  const parsed = parseModelUrl(url);
  const location = checkModelLocation(parsed.url, {
    modelStore: server.config.modelStore,
    allowedUrls: server.config.allowedUrls,
  });
  return server.manage({
    kind: 'register',
    request: {
      // The checked location, so that relative store paths and links resolve as they were checked.
      url: formatModelUrl({ ...parsed, url: location.path }),
      root: location.root,
      ...settings,
    },
    synchronous,
  });
}
