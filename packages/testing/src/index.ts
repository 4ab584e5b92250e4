export * from './engine-requirements.js';
