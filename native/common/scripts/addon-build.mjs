// What the addons' install scripts share: the build report, the staleness check, the prebuilt
// lookup, finishing without failing `npm ci` (unless --force), and running cmake-js with the
// shared N-API helpers. Packed packages carry a copy of this folder as kiln-common/.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const commonDir = dirname(dirname(fileURLToPath(import.meta.url)));

/**
 * @param {{ packageDir: string, addonFile: string, label: string }} addon
 *   packageDir: the native package; addonFile: the built file's name in build/Release;
 *   label: the log prefix, e.g. `kiln-dlr`.
 */
export function addonBuild({ packageDir, addonFile, label }) {
  const buildDir = join(packageDir, 'build');
  const addonPath = join(buildDir, 'Release', addonFile);
  const force = process.argv.includes('--force');
  const jobs = process.env.KILN_BUILD_JOBS ?? '2';

  return {
    addonPath,
    force,
    jobs,

    /** Writes build/kiln-build.json, which the engine quotes when the addon is missing. */
    report(status, details) {
      mkdirSync(buildDir, { recursive: true });
      writeFileSync(
        join(buildDir, 'kiln-build.json'),
        `${JSON.stringify({ status, at: new Date().toISOString(), ...details }, null, 2)}\n`,
      );
    },

    /** Logs and exits: with `code` under --force, else 0 so that installing never fails. */
    finish(code, message) {
      console.log(`[${label}] ${message}`);
      process.exit(force ? code : 0);
    },

    /**
     * The prebuilt addon shipped for this platform (prebuilds/<platform>-<arch>/, node-gyp-build
     * naming; `prebuildsDir` overrides the folder), or undefined when none fits.
     */
    prebuilt(prebuildsDir = join(packageDir, 'prebuilds')) {
      const dir = join(prebuildsDir, `${process.platform}-${process.arch}`);
      const base = addonFile.replace(/\.node$/, '');
      const names =
        process.platform === 'linux' ? [`${base}.${libc()}.node`, addonFile] : [addonFile];
      return names.map((name) => join(dir, name)).find((path) => existsSync(path));
    },

    /** Loads `path` in a child process: undefined when it loads, else the first line of why not. */
    loadProblem(path) {
      const probe = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path)})`], {
        encoding: 'utf8',
      });
      if (probe.status === 0) return undefined;
      const lines = `${probe.stderr ?? ''}`.split('\n').filter((l) => /Error/.test(l));
      return lines[0]?.trim() ?? `exited with ${probe.status}`;
    },

    /**
     * Finishes with the prebuilt addon for this platform when there is one and it loads here
     * (not under --force); returns otherwise, for the build from source to go on.
     */
    usePrebuiltIfItLoads(prebuildsDir) {
      const prebuilt = this.prebuilt(prebuildsDir);
      if (force || !prebuilt || this.loadProblem(prebuilt)) return;
      this.report('prebuilt', { addon: prebuilt });
      this.finish(0, `using the prebuilt addon ${prebuilt}`);
    },

    /** What building from source lacks here: cmake, a C++ compiler (one line each). */
    missingBuildTools() {
      const missing = [];
      if (!findTool(['cmake'])) missing.push('cmake (apt-get install cmake, brew install cmake)');
      if (process.platform !== 'win32' && !findTool([process.env.CXX ?? 'c++', 'g++', 'clang++'])) {
        missing.push('a C++17 compiler (apt-get install g++, xcode-select --install)');
      }
      return missing;
    },

    /**
     * The npm packages building from source needs and this install lacks. They are the addon
     * package's devDependencies: installing the prebuilt addon pulls in no build tools.
     */
    missingBuildPackages() {
      const require = createRequire(join(packageDir, 'package.json'));
      const lacking = BUILD_PACKAGES.filter((name) => {
        try {
          require.resolve(`${name}/package.json`);
          return false;
        } catch {
          return true;
        }
      });
      if (lacking.length === 0) return [];
      return [
        `the ${lacking.join(' and ')} package${lacking.length === 1 ? '' : 's'} (npm install --no-save ${BUILD_PACKAGES.join(' ')})`,
      ];
    },

    /** Whether the built addon is newer than its sources and the shared helpers. */
    upToDate() {
      if (!existsSync(addonPath)) return false;
      return (
        statSync(addonPath).mtimeMs >=
        newestSource([join(packageDir, 'src'), join(packageDir, 'CMakeLists.txt'), commonDir])
      );
    },

    /** Finishes at once (not under --force) when `variable` is `1`: the user skips the build. */
    skipIfAsked(variable, what) {
      if (!force && process.env[variable] === '1')
        this.finish(0, `${variable}=1: not building ${what}`);
    },

    /**
     * Builds `what` from source with `cmake-js build` and finishes: built, or why not (the tools
     * missing here plus `missing`, or the build's failure) followed by `unavailable`, what goes
     * without the addon. `packageName` names the rebuild that fixes a missing tool.
     */
    buildFromSource({ what, unavailable, packageName, missing = [] }) {
      const lacking = [...this.missingBuildTools(), ...missing];
      if (lacking.length > 0) {
        const reason = `cannot build ${what}: missing ${lacking.join(' and ')}`;
        this.report('skipped', { reason });
        this.finish(
          1,
          `${reason}; ${unavailable} until \`npm rebuild ${packageName} --foreground-scripts\` succeeds`,
        );
      }
      console.log(`[${label}] building ${what}, ${jobs} jobs`);
      const result = this.cmakeJs('build', ['--parallel', jobs]);
      if (result.status !== 0 || !existsSync(addonPath)) {
        const reason = result.error
          ? result.error.message
          : `cmake-js exited with ${result.status}`;
        this.report('failed', { reason });
        this.finish(1, `building ${what} failed (${reason}); ${unavailable}`);
      }
      this.report('built', { addon: addonPath });
      this.finish(0, `built ${addonPath}`);
    },

    /** Runs `cmake-js <command>` on the package, the shared helpers' folder defined. */
    cmakeJs(command, extraArgs = []) {
      // cmake-js as the package sees it (its devDependency), wherever npm placed it.
      const require = createRequire(join(packageDir, 'package.json'));
      const cmakeJs = join(dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
      const args = [
        cmakeJs,
        command,
        '--directory',
        packageDir,
        '--out',
        buildDir,
        '--config',
        'Release',
        `--CDKILN_NAPI_COMMON=${commonDir}`,
        ...extraArgs,
      ];
      return spawnSync(process.execPath, args, { cwd: packageDir, stdio: 'inherit' });
    },
  };
}

/** What building an addon from source needs from npm, beside cmake and a C++ compiler. */
const BUILD_PACKAGES = ['cmake-js', 'node-addon-api'];

function libc() {
  return process.report?.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
}

/** The first of `commands` that answers `--version`, or undefined. */
export function findTool(commands) {
  for (const command of commands) {
    const probe = spawnSync(command, ['--version'], { stdio: 'ignore' });
    if (!probe.error && probe.status === 0) return command;
  }
  return undefined;
}

/** Newest modification time of the C++ and CMake files under `paths`. */
function newestSource(paths) {
  let newest = 0;
  const visit = (path) => {
    if (!existsSync(path)) return;
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const name of readdirSync(path)) visit(join(path, name));
    } else if (/\.(cc|h|cmake|txt)$/.test(path)) {
      newest = Math.max(newest, stat.mtimeMs);
    }
  };
  paths.forEach(visit);
  return newest;
}
