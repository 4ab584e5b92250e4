import { KilnError, KilnErrorCode } from '../errors.js';
import { ENGINE_SPECIFICATION_VERSION, type Engine, type EngineProvider } from './engine.js';
import { installHint } from './engine-packages.js';

export const DEFAULT_ENGINE_ENV = 'KILN_DEFAULT_ENGINE';

interface Entry {
  provider: EngineProvider;
  /** Set once load() was tried: the engine, or why it is unavailable. */
  loading?: Promise<Engine>;
}

/**
 * Engines by name and rank. Engines load lazily on first use; one that fails to load is
 * remembered as unavailable and the next is tried; when none works, one error lists every
 * engine's reason (onnxruntime-common's backend resolution).
 */
export class EngineRegistry {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly env: Readonly<Record<string, string | undefined>> = process.env) {}

  register(provider: EngineProvider): void {
    if (provider.specificationVersion !== ENGINE_SPECIFICATION_VERSION) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `engine provider ${provider.name} implements ${String(provider.specificationVersion)}, but this Kiln needs ${ENGINE_SPECIFICATION_VERSION}`,
      );
    }
    this.entries.set(provider.name.toLowerCase(), { provider });
  }

  /** Registered providers, preferred first (KILN_DEFAULT_ENGINE, then rank). */
  providers(): EngineProvider[] {
    const preferred = this.env[DEFAULT_ENGINE_ENV]?.toLowerCase();
    return [...this.entries.values()]
      .map((e) => e.provider)
      .sort((a, b) => {
        if (preferred) {
          if (a.name.toLowerCase() === preferred) return -1;
          if (b.name.toLowerCase() === preferred) return 1;
        }
        return b.rank - a.rank;
      });
  }

  has(name: string): boolean {
    return this.entries.has(name.toLowerCase());
  }

  /** The named engine, or the best available one when no name is given. */
  async get(name?: string): Promise<Engine> {
    if (name) {
      const entry = this.entries.get(name.toLowerCase());
      if (!entry) {
        const hint = installHint(name);
        throw new KilnError(
          KilnErrorCode.EngineUnavailable,
          `engine ${name} is not registered (registered: ${this.names().join(', ') || 'none'})${hint ? `: ${hint}` : ''}`,
          hint ? { details: { hint } } : {},
        );
      }
      return this.load(entry);
    }
    return this.firstAvailable(this.providers());
  }

  /** The best available engine whose provider recognizes these model files. */
  async forModelFiles(fileNames: readonly string[]): Promise<Engine> {
    const candidates = this.providers().filter((p) => p.recognizes(fileNames));
    if (candidates.length === 0) {
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `no registered engine recognizes the model files (${fileNames.slice(0, 10).join(', ') || 'none'}); name one with engine= in serving.properties or the model URL`,
      );
    }
    return this.firstAvailable(candidates);
  }

  names(): string[] {
    return this.providers().map((p) => p.name);
  }

  private load(entry: Entry): Promise<Engine> {
    entry.loading ??= entry.provider.load().catch((error: unknown) => {
      throw KilnError.wrap(
        error,
        KilnErrorCode.EngineUnavailable,
        `engine ${entry.provider.name} is unavailable`,
      );
    });
    return entry.loading;
  }

  private async firstAvailable(providers: readonly EngineProvider[]): Promise<Engine> {
    const reasons: Record<string, string> = {};
    for (const provider of providers) {
      try {
        return await this.load(this.entries.get(provider.name.toLowerCase())!);
      } catch (error) {
        reasons[provider.name] = error instanceof Error ? error.message : String(error);
      }
    }
    const list = Object.entries(reasons).map(([n, r]) => `${n}: ${r}`);
    throw new KilnError(
      KilnErrorCode.EngineUnavailable,
      list.length === 0
        ? 'no engine is registered'
        : `no engine could be loaded:\n  ${list.join('\n  ')}`,
      { details: { reasons } },
    );
  }
}
