export { runKiln } from './cli.js';
