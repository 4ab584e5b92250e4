import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pc from 'picocolors';
import { runHttpBench } from '../http/http-bench.js';
import { runInProcessBench } from '../inprocess/in-process-bench.js';
import { terminalProgress } from '../progress.js';
import { csvReport } from '../report/csv-report.js';
import { htmlReport } from '../report/html-report.js';
import { textReport } from '../report/text-report.js';
import type { BenchResult } from '../results.js';
import { configPropertiesText, servingPropertiesText } from '../tune/recommendation.js';
import { runTune } from '../tune/tune.js';
import type { BenchPlan } from './bench-options.js';

/** Where a run writes: stdout gets the report (or JSON), stderr the progress and notes. */
export interface BenchIo {
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
}

export interface OutputStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

/** Runs a plan, prints its report and writes the files asked for. */
export async function executePlan(plan: BenchPlan, io: BenchIo): Promise<BenchResult> {
  const progress = io.stderr.isTTY ? terminalProgress(io.stderr as NodeJS.WriteStream) : undefined;
  let result: BenchResult;
  switch (plan.kind) {
    case 'in-process':
      result = await runInProcessBench({ ...plan.options, progress });
      break;
    case 'http':
      result = await runHttpBench({ ...plan.options, progress });
      break;
    case 'tune':
      result = await runTune({ ...plan.options, progress });
      break;
  }
  const { json, csv, html } = plan.outputs;
  if (json === true) {
    io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } else {
    const colors = pc.createColors(Boolean(io.stdout.isTTY) && !process.env.NO_COLOR);
    io.stdout.write(`${textReport(result, colors)}\n`);
  }
  const notes = json === true ? io.stderr : io.stdout;
  const files: [string | undefined, () => string][] = [
    [typeof json === 'string' ? json : undefined, () => `${JSON.stringify(result, null, 2)}\n`],
    [csv, () => csvReport(result)],
    [html, () => htmlReport(result)],
  ];
  if (result.kind === 'tune') {
    files.push([plan.outputs.save, () => servingPropertiesText(result)]);
    files.push([
      plan.outputs.saveConfig,
      () =>
        configPropertiesText(result) || '# kiln-bench --tune: no server-wide keys to recommend\n',
    ]);
  }
  for (const [file, render] of files) {
    if (file === undefined) continue;
    await mkdir(path.dirname(path.resolve(file)), { recursive: true });
    await writeFile(file, render());
    notes.write(`wrote ${file}\n`);
  }
  return result;
}
