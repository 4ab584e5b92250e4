export * from './binding.js';
export * from './loader.js';
