import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The server package's version, reported by `/v2` and the OpenAPI documents. */
export const SERVER_VERSION: string = (require('../package.json') as { version: string }).version;
