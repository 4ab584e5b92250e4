// The `kiln` command's entry. It imports next to nothing, so that when the command line serves
// models the first model's host thread starts at once: the thread's own start (Node, Kiln's
// modules, then the first local model's engine) overlaps the command line's and the server's
// imports (bench/README.md, startup). Everything else loads afterwards (cli.ts).
import { prestartHostThread } from '@kiln/worker-pool/prestart';
import { localModelFolders, servesModels } from './serves-models.js';

const isMain =
  process.argv[1] !== undefined && /(?:kiln(?:\.mjs)?|main\.(?:ts|js))$/.test(process.argv[1]);
if (isMain) {
  const args = process.argv.slice(2);
  if (servesModels(args)) prestartHostThread({ preloadModels: localModelFolders(args) });
  // `kiln … | head` closes stdout early: that is the reader's choice, not a failure.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0);
    throw error;
  });
  const { runKiln } = await import('./cli.js');
  const code = await runKiln(args);
  // serve keeps running through its listeners; other commands end here.
  if (code !== 0 || !args.includes('serve')) process.exitCode = code;
  // An ingress process that failed to start: its channel to the primary would keep it alive.
  if (code !== 0 && process.connected) process.disconnect();
}
