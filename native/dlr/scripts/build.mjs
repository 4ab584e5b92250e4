// Placeholder replaced by the LibTorch build script.
process.exit(0);
