import { describe, expect, it } from 'vitest';
import { DecodeRunCosts } from './run-costs.js';

/** A machine where a run costs `fixed` + `perRow` a row + `perPosition` a padded position. */
function timed(fixed: number, perRow: number, perPosition: number) {
  return (rows: number, past: number) => fixed + perRow * rows + perPosition * rows * (past + 1);
}

describe('DecodeRunCosts', () => {
  it('keeps its estimate until enough runs have been seen', () => {
    const costs = new DecodeRunCosts(8000);
    const ms = timed(6, 0.7, 0.014);
    for (let i = 0; i < 11; i++)
      costs.observe(1 + (i % 16), 20 + 13 * i, ms(1 + (i % 16), 20 + 13 * i));
    expect(costs.runCost).toBe(8000);
  });

  it('learns fixed ÷ perPosition from runs of varied rows and pasts, and follows a change', () => {
    const costs = new DecodeRunCosts(8000);
    let ms = timed(6, 0.7, 0.014);
    for (let i = 0; i < 40; i++) {
      const rows = 1 + ((i * 7) % 16);
      const past = 8 + ((i * 37) % 300);
      costs.observe(rows, past, ms(rows, past));
    }
    expect(costs.runCost).toBeCloseTo(6 / 0.014, 0);
    // The machine changes (another process takes a core): the fit follows the recent runs.
    ms = timed(12, 1.4, 0.014);
    for (let i = 0; i < 400; i++) {
      const rows = 1 + ((i * 5) % 16);
      const past = 8 + ((i * 29) % 300);
      costs.observe(rows, past, ms(rows, past));
    }
    expect(costs.runCost).toBeCloseTo(12 / 0.014, -1);
  });

  it('keeps its estimate where the runs cannot tell the terms apart or the fit makes no sense', () => {
    const alike = new DecodeRunCosts(500);
    for (let i = 0; i < 50; i++) alike.observe(16, 100, 30);
    expect(alike.runCost).toBe(500);

    // Longer pasts running faster: no positive cost a position.
    const nonsense = new DecodeRunCosts(500);
    for (let i = 0; i < 50; i++) {
      const rows = 1 + (i % 16);
      const past = 8 + ((i * 37) % 300);
      nonsense.observe(rows, past, 40 - 0.001 * rows * past);
    }
    expect(nonsense.runCost).toBe(500);

    const ignored = new DecodeRunCosts(500);
    for (let i = 0; i < 50; i++) ignored.observe(i % 2 ? 0 : 4, 10, Number.NaN);
    expect(ignored.runCost).toBe(500);
  });
});
