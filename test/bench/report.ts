import { writeFile } from 'node:fs/promises';

export type Verdict = 'yes' | 'NO' | 'info' | 'FAILED';

export interface Row {
  measure: string;
  raw: string;
  ens: string;
  ratio: string;
  target: string;
  met: Verdict;
}

/**
 * Collects table rows, notes and the raw data of every phase; prints the table and writes the JSON.
 */
export class Report {
  readonly rows: Row[] = [];
  readonly notes: string[] = [];
  readonly data: Record<string, unknown> = {};
  readonly diagnostics: { label: string; text: string; data: unknown }[] = [];

  /** What the machine was doing during one measurement (printed after the notes). */
  diag(label: string, text: string, data: unknown): void {
    this.diagnostics.push({ label, text, data });
  }

  row(r: Row): void {
    this.rows.push(r);
  }

  note(text: string): void {
    this.notes.push(text);
  }

  /** A ratio row: ENS / raw against a minimum. */
  ratioRow(measure: string, raw: number, ens: number, unit: string, minimum: number): number {
    const ratio = ens / raw;
    this.row({
      measure,
      raw: `${fmt(raw)} ${unit}`,
      ens: `${fmt(ens)} ${unit}`,
      ratio: Number.isFinite(ratio) ? ratio.toFixed(2) : 'n/a',
      target: `ratio ≥ ${minimum.toFixed(2)}`,
      met: ratio >= minimum ? 'yes' : 'NO',
    });
    return ratio;
  }

  failed(measure: string, err: unknown): void {
    const msg = (err as Error)?.message ?? String(err);
    this.row({
      measure,
      raw: '',
      ens: `error: ${msg.split('\n')[0]!.slice(0, 60)}`,
      ratio: '',
      target: '',
      met: 'FAILED',
    });
    this.note(`${measure} failed: ${msg}`);
  }

  table(header: string[]): string {
    const cols: (keyof Row)[] = ['measure', 'raw', 'ens', 'ratio', 'target', 'met'];
    const titles = ['Measure', 'Raw engine', 'ENS', 'ENS/raw', 'Target', 'Met'];
    const widths = cols.map((c, i) =>
      Math.max(titles[i]!.length, ...this.rows.map((r) => r[c].length)),
    );
    const line = (cells: string[]) =>
      cells
        .map((c, i) => c.padEnd(widths[i]!))
        .join(' | ')
        .trimEnd();
    const sep = widths.map((w) => '-'.repeat(w)).join('-+-');
    const missed = this.rows.filter((r) => r.met === 'NO' || r.met === 'FAILED');
    return [
      ...header,
      '',
      line(titles),
      sep,
      ...this.rows.map((r) => line(cols.map((c) => r[c]))),
      '',
      missed.length === 0
        ? 'All targets met.'
        : `Targets MISSED or failed: ${missed.map((r) => r.measure).join('; ')}`,
      ...(this.notes.length ? ['', 'Notes:', ...this.notes.map((n) => `- ${n}`)] : []),
      ...(this.diagnostics.length
        ? [
            '',
            'Machine use during each measurement:',
            ...this.diagnostics.map((d) => `- ${d.label}: ${d.text}`),
          ]
        : []),
    ].join('\n');
  }

  async writeJson(file: string, extra: Record<string, unknown>): Promise<void> {
    await writeFile(
      file,
      `${JSON.stringify({ ...extra, rows: this.rows, notes: this.notes, diagnostics: this.diagnostics, data: this.data }, null, 2)}\n`,
    );
  }
}

/** Rates and times with sensible precision: 12345 → "12,345", 12.345 → "12.3", 0.5 → "0.50". */
export function fmt(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

export function ms(v: number): string {
  return v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${fmt(v)} ms`;
}

export function outcomesText(outcomes: Record<string, number>, ok: string): string {
  const bad = Object.entries(outcomes).filter(([k]) => k !== ok);
  return bad.length === 0 ? `none` : bad.map(([k, n]) => `${n} × ${k}`).join(', ');
}
