import { CPU, type Device, type Engine, KilnErrorCode, type ModelLoadRequest } from '@kiln/core';
import {
  type DlrLibraryHandle,
  type LibraryCandidate,
  loadDlrAddon,
  openDlrLibrary,
} from '@kiln/dlr-native';
import { toKilnError } from './dlr-errors.js';
import { DlrModel } from './dlr-model.js';
import { ENGINE_NAME } from './engine-name.js';

export { ENGINE_NAME };

export interface DlrEngineSettings {
  /** A libdlr file to try before KILN_DLR_LIBRARY and the usual places. */
  readonly libraryPath?: string;
  /** Threads per predictor unless option.numThreads or the worker pool says otherwise. Default 1. */
  readonly defaultThreads?: number;
  /** Where KILN_DLR_LIBRARY, DLR_HOME and friends are read; process.env by default. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * Devices models may be loaded on (cpu is always one). DLR cannot say which accelerators its
   * build supports, so GPUs are offered only when listed here.
   */
  readonly devices?: readonly Device[];
}

/** TVM-compiled models through DLR's C API (native addon, libdlr opened at run time). */
export class DlrEngine implements Engine {
  readonly name = ENGINE_NAME;
  readonly version: string;

  private constructor(
    private readonly library: DlrLibraryHandle,
    private readonly foundBy: LibraryCandidate,
    private readonly defaultThreads: number,
    private readonly tvmNumThreads: string,
    private readonly offered: readonly Device[],
  ) {
    this.version = library.version ?? 'unknown';
  }

  /**
   * Loads the addon and opens libdlr. Throws KilnError(ENGINE_UNAVAILABLE) naming every place
   * looked at, with why each failed and how to fix it.
   */
  static async load(settings: DlrEngineSettings = {}): Promise<DlrEngine> {
    const env = settings.env ?? process.env;
    const defaultThreads = settings.defaultThreads ?? 1;
    try {
      const addon = loadDlrAddon(env);
      const opened = await openDlrLibrary(addon, { libraryPath: settings.libraryPath, env });
      // DJL's finding: TVM_NUM_THREADS=1 per worker gives the best multi-worker throughput.
      // TVM reads it when a thread first runs a model; a value the user set is kept.
      const tvmNumThreads = addon.defaultTvmThreads(defaultThreads);
      const devices = [CPU, ...(settings.devices ?? []).filter((d) => d.type !== 'cpu')];
      return new DlrEngine(
        opened.library,
        opened.candidate,
        defaultThreads,
        tvmNumThreads,
        devices,
      );
    } catch (error) {
      throw toKilnError(error, KilnErrorCode.EngineUnavailable);
    }
  }

  /** cpu, plus the devices the engine was configured with. */
  devices(): readonly Device[] {
    return this.offered;
  }

  describe(): Record<string, unknown> {
    return {
      runtime: 'DLR',
      version: this.version,
      library: this.library.path,
      foundBy: this.foundBy.source,
      missingOptionalFunctions: [...this.library.missingOptional],
      defaultThreadsPerPredictor: this.defaultThreads,
      TVM_NUM_THREADS: this.tvmNumThreads,
    };
  }

  loadModel(request: ModelLoadRequest): Promise<DlrModel> {
    return DlrModel.load(this.library, request, { defaultThreads: this.defaultThreads });
  }
}
