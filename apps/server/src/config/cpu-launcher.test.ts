import { describe, expect, it } from 'vitest';
import { KilnError } from '@kiln/core';
import { CPU_LAUNCHER_OFF, parseCpuLauncher } from './cpu-launcher.js';
import { loadServerConfig } from './server-config.js';

describe('parseCpuLauncher', () => {
  it('is off with glibc malloc by default', () => {
    expect(parseCpuLauncher('false', '')).toEqual(CPU_LAUNCHER_OFF);
    expect(loadServerConfig({ env: {} }).cpuLauncher).toEqual(CPU_LAUNCHER_OFF);
  });

  it("reads TorchServe's flags, with --flag=value too", () => {
    expect(
      parseCpuLauncher(
        'TRUE',
        ' --use_logical_core --ninstances 4 --node_id=1  --disable_numactl --enable_jemalloc ',
      ),
    ).toEqual({
      enabled: true,
      useLogicalCores: true,
      instances: 4,
      nodeId: 1,
      disableNumactl: true,
      allocator: 'jemalloc',
      args: '--use_logical_core --ninstances 4 --node_id=1  --disable_numactl --enable_jemalloc',
    });
    expect(parseCpuLauncher('true', '--enable_tcmalloc').allocator).toBe('tcmalloc');
    expect(parseCpuLauncher('true', '--use_default_allocator').allocator).toBe('default');
  });

  it('refuses an unknown flag, a bad number and two allocators, naming the flag', () => {
    const refused = (args: string) => {
      try {
        parseCpuLauncher('true', args);
      } catch (error) {
        expect(error).toBeInstanceOf(KilnError);
        expect((error as KilnError).code).toBe('INVALID_CONFIG');
        return (error as Error).message;
      }
      throw new Error(`${args} was accepted`);
    };
    expect(refused('--use_logical_cores')).toMatch(/unknown flag --use_logical_cores/);
    expect(refused('--ncore_per_instance 2')).toMatch(/unknown flag --ncore_per_instance/);
    expect(refused('--ninstances')).toMatch(/--ninstances needs an integer/);
    expect(refused('--ninstances two')).toMatch(/--ninstances needs an integer/);
    expect(refused('--ninstances 0')).toMatch(/--ninstances 0 must be ≥ 1/);
    expect(refused('--node_id -1')).toMatch(/--node_id -1 must be ≥ 0/);
    expect(refused('--enable_jemalloc --enable_tcmalloc')).toMatch(
      /--enable_jemalloc and --enable_tcmalloc both choose/,
    );
    expect(() => parseCpuLauncher('yes', '')).toThrow(/cpu_launcher_enable=yes must be true/);
  });

  it('comes from config.properties keys, the environment and flags', () => {
    const config = loadServerConfig({
      env: { KILN_CPU_LAUNCHER_ARGS: '--node_id 0' },
      overrides: { cpu_launcher_enable: 'true' },
    });
    expect(config.cpuLauncher).toMatchObject({ enabled: true, nodeId: 0, allocator: 'default' });
    expect(() =>
      loadServerConfig({ env: {}, overrides: { cpu_launcher_args: '--bogus' } }),
    ).toThrow(/unknown flag --bogus/);
    // Each ingress process would pin its workers to the same cores.
    expect(() =>
      loadServerConfig({
        env: {},
        overrides: { cpu_launcher_enable: 'true', ingress_processes: '2' },
      }),
    ).toThrow(/cpu_launcher_enable=true needs ingress_processes=1/);
  });
});
