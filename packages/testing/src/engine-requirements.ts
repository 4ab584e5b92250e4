/**
 * Engines named in KILN_REQUIRE_ENGINES (comma-separated, e.g. `OnnxRuntime,PyTorch`) must run:
 * their tests fail instead of skipping when the engine is missing. Elsewhere a missing engine
 * skips its tests with a printed reason.
 */
export function requiredEngines(
  env: Readonly<Record<string, string | undefined>> = process.env,
): string[] {
  return (env.KILN_REQUIRE_ENGINES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export function isEngineRequired(name: string, env = process.env): boolean {
  return requiredEngines(env).some((n) => n.toLowerCase() === name.toLowerCase() || n === '*');
}

export interface EngineAvailability {
  /** Whether the engine's tests should run. */
  readonly run: boolean;
  /** Why they are skipped, when they are. */
  readonly reason: string | undefined;
}

/**
 * Decides whether an engine's tests run. `probe` returns null when the engine is usable, or
 * the reason it is not. A required engine that is missing throws, failing the test file.
 */
export async function checkEngine(
  name: string,
  probe: () => Promise<string | null>,
): Promise<EngineAvailability> {
  let reason: string | null;
  try {
    reason = await probe();
  } catch (error) {
    reason = error instanceof Error ? error.message : String(error);
  }
  if (reason === null) return { run: true, reason: undefined };
  if (isEngineRequired(name)) {
    throw new Error(
      `engine ${name} is required by KILN_REQUIRE_ENGINES but unavailable: ${reason}`,
    );
  }
  console.warn(`[kiln] skipping ${name} tests: ${reason}`);
  return { run: false, reason };
}
