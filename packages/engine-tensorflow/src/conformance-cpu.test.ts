import { describeBackendConformance } from './test-support/conformance.js';

describeBackendConformance('cpu');
