import { type ImageInputExpectation, type TensorDescriptor, formatShape } from '@kiln/core';
import { formatBytes, formatMs, textTable } from '@kiln/benchmark';
import type { CliContext } from '../cli-context.js';
import type { ImageInputReport, ModelReport } from './model-report.js';

/** Files printed before the list is cut short. */
const SHOWN_FILES = 20;
/** Nesting shown of what engines report; deeper values print as JSON. */
const FACT_DEPTH = 3;

/** The report of `kiln inspect` for people. */
export function formatModelReport(report: ModelReport, color: CliContext['color']): string {
  const heading = (text: string) => color.bold(text);
  const loaded = report.loaded;
  const engine = report.engine
    ? `${report.engine}${loaded ? ` ${loaded.engineVersion}` : ''} (${report.engineChoice === 'named' ? 'named in serving.properties or the URL' : 'recognised from the files'})`
    : color.yellow('none recognised');
  const lines = [
    `${heading('model')}       ${report.name}${report.version ? ` version ${report.version}` : ''}`,
    `${heading('engine')}      ${engine}`,
    `${heading('location')}    ${report.location}${report.archive ? ` (extracted from ${report.archive})` : ''}`,
  ];
  if (report.modelFile) lines.push(`${heading('model file')}  ${report.modelFile}`);
  lines.push(
    `${heading('size')}        ${formatBytes(report.sizeBytes)} in ${report.files.length} file${report.files.length === 1 ? '' : 's'}`,
  );
  if (loaded)
    lines.push(`${heading('loaded')}      on ${loaded.device} in ${formatMs(loaded.loadMs)} ms`);
  lines.push(`${heading('translator')}  ${report.translator}`);
  if (report.imageInput) lines.push(...imageInputLines(report.imageInput, color));

  if (loaded) {
    lines.push(
      '',
      heading('inputs'),
      tensors(loaded.inputs),
      '',
      heading('outputs'),
      tensors(loaded.outputs),
    );
  }

  lines.push('', heading('files'));
  const shown = report.files.slice(0, SHOWN_FILES);
  const pathWidth = Math.max(...shown.map((f) => f.path.length));
  for (const file of shown)
    lines.push(
      `  ${file.path.padEnd(pathWidth)}  ${color.dim(formatBytes(file.bytes).padStart(10))}`,
    );
  if (report.files.length > SHOWN_FILES)
    lines.push(color.dim(`  … and ${report.files.length - SHOWN_FILES} more`));

  lines.push('', heading('serving.properties (in force)'));
  const settings = [
    ...Object.entries(report.servingProperties.set).map(([key, value]) => ({
      text: `${key}=${value}`,
      note: '',
    })),
    ...Object.entries(report.servingProperties.defaults).map(([key, value]) => ({
      text: `${key}=${value}`,
      note: "# Kiln's default",
    })),
  ];
  const settingWidth = Math.max(...settings.map((setting) => setting.text.length));
  for (const { text, note } of settings)
    lines.push(`  ${note ? `${text.padEnd(settingWidth)}  ${color.dim(note)}` : text}`);

  if (loaded) {
    lines.push('', heading('engine reports'), ...facts(loaded.engineReport, 1));
    // Inputs and outputs are listed above already.
    const { inputs: _inputs, outputs: _outputs, ...model } = loaded.modelReport;
    lines.push('', heading('model reports'), ...facts(model, 1));
  } else {
    lines.push(
      '',
      color.dim('not loaded (--no-load): inputs, outputs and what the engine reports need a load'),
    );
  }
  return lines.join('\n');
}

/** The channel order and value range an image model is fed, and what disagrees with them. */
function imageInputLines(input: ImageInputReport, color: CliContext['color']): string[] {
  const heading = color.bold('image input');
  if (!input.stated) return [`${heading} ${color.yellow(`not stated: ${input.note}`)}`];
  const range = input.range === '0-1' ? 'values 0..1' : 'values 0..255';
  const line = `${heading} ${input.channels} order, ${range}, ${statisticsText(input)}, ${input.layout} ${input.width}×${input.height}`;
  return [line, ...input.warnings.map((warning) => color.yellow(`  warning: ${warning}`))];
}

function statisticsText(input: ImageInputExpectation): string {
  const { normalize } = input;
  if (!normalize) return 'no mean/std';
  const numbers = `mean ${normalize.mean.join(',')} std ${normalize.std.join(',')} (R,G,B)`;
  if (input.statistics === 'imagenet') return `ImageNet ${numbers}`;
  if (input.statistics === 'imagenet-caffe') return `Caffe's ImageNet ${numbers}`;
  return numbers;
}

function tensors(list: readonly TensorDescriptor[]): string {
  if (list.length === 0) return '  (the engine declares none)';
  return textTable(
    ['name', 'dtype', 'shape'],
    // Engines may leave a name out (a TF.js layers model's inputs have none).
    list.map((t) => [
      t.name ?? '(unnamed)',
      t.dtype ?? 'any',
      t.shape ? formatShape(t.shape) : 'any',
    ]),
    { indent: '  ', leftColumns: [0, 1, 2] },
  );
}

/** Nested facts as indented `key: value` lines. */
function facts(value: Record<string, unknown>, depth: number): string[] {
  const indent = '  '.repeat(depth);
  const lines: string[] = [];
  for (const [key, item] of Object.entries(value)) {
    if (item === undefined) continue;
    if (item !== null && typeof item === 'object' && !Array.isArray(item) && depth < FACT_DEPTH) {
      lines.push(`${indent}${key}:`, ...facts(item as Record<string, unknown>, depth + 1));
    } else if (Array.isArray(item) && item.every((x) => x === null || typeof x !== 'object')) {
      lines.push(`${indent}${key}: ${item.join(', ') || '(none)'}`);
    } else if (Array.isArray(item) && item.every(isFlatObject)) {
      lines.push(`${indent}${key}:`);
      for (const entry of item as Record<string, unknown>[]) {
        const pairs = Object.entries(entry).map(([k, v]) => `${k}=${String(v)}`);
        lines.push(`${indent}  - ${pairs.join(' ')}`);
      }
    } else if (item !== null && typeof item === 'object') {
      lines.push(`${indent}${key}: ${JSON.stringify(item)}`);
    } else {
      lines.push(`${indent}${key}: ${String(item)}`);
    }
  }
  return lines;
}

function isFlatObject(value: unknown): boolean {
  return (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.values(value).every((v) => v === null || typeof v !== 'object')
  );
}
