import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DockerfileParser } from 'dockerfile-ast';
import { validate } from 'dockerfile-utils';
import { describe, expect, it } from 'vitest';

// What CI checks of the image without building it (a build takes minutes: npm run
// test:container builds, runs and stops it): the Containerfile is valid, it takes the base and
// the files build-image.sh prepares, and it keeps KServe's conventions.
const CONTAINERFILE = fileURLToPath(new URL('./container/Containerfile', import.meta.url));
const BUILD_SCRIPT = fileURLToPath(new URL('./container/build-image.sh', import.meta.url));
const text = fs.readFileSync(CONTAINERFILE, 'utf8');
const script = fs.readFileSync(BUILD_SCRIPT, 'utf8');
const instructions = DockerfileParser.parse(text).getInstructions();
const args = (keyword: string) =>
  instructions
    .filter((i) => i.getKeyword() === keyword)
    .map((i) => i.getArguments().map((a) => a.getValue()));

describe('the Containerfile', () => {
  it('has no errors or warnings by the Dockerfile linter', () => {
    const problems = validate(text).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
    expect(problems).toEqual([]);
  });

  it('builds on the base that build-image.sh imports and copies what it stages', () => {
    const [from] = args('FROM');
    expect(from).toEqual(['localhost/kiln-base:bookworm']);
    expect(script).toContain(`import "$work/rootfs.tar" ${from![0]}`);
    for (const [source] of args('COPY')) {
      expect(script, `build-image.sh stages ${source}`).toMatch(
        new RegExp(`"\\$context/${source!.replace('.', '\\.')}"`),
      );
    }
  });

  it('runs kiln serve as a non-root user with KServe ports and model folder', () => {
    const [user] = args('USER');
    expect(Number(user![0]!.split(':')[0])).toBeGreaterThan(0);
    expect(text).toMatch(/ENTRYPOINT \["kiln", "serve"\]/);
    expect(text).toContain('--model_dir=/mnt/models');
    expect(args('EXPOSE').flat()).toEqual(['8080', '8081', '8082']);
    expect(text).toContain('KILN_INFERENCE_ADDRESS=http://0.0.0.0:8080');
    expect(text).toContain('KILN_MANAGEMENT_ADDRESS=http://127.0.0.1:');
  });

  it('has a build script that bash can parse', () => {
    const check = spawnSync('bash', ['-n', BUILD_SCRIPT], { encoding: 'utf8' });
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
  });
});
