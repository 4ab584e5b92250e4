export { runKiln } from './main.js';
