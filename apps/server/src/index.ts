export * from './kiln-server.js';
export * from './config/server-config.js';
export * from './models/model-manager.js';
export * from './models/model-entry.js';
export * from './models/engine-catalog.js';
export * from './http/error-status.js';
export * from './security/url-allowlist.js';
export { SERVER_VERSION } from './version.js';
