/**
 * Progress lines on stderr, stamped with the time since the run started. stdout carries only the
 * report.
 */
const started = Date.now();

export function progress(message: string): void {
  process.stderr.write(
    `[bench +${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${message}\n`,
  );
}

export function elapsedMs(): number {
  return Date.now() - started;
}

/**
 * A wall clock with sub-millisecond resolution on the same base as Date.now(), comparable across
 * processes.
 */
export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
