/**
 * One periodic job: a pass of work the scheduler (scheduler.ts) starts every `everyMs`. Every job
 * ENS runs is declared in catalogue.ts; the work it calls lives beside the data it keeps.
 */
export interface Job {
  /** Names the job: the `job` label of the ens_job_* metrics, and of its failure log. */
  readonly name: string;
  /** Time between the starts of two passes. */
  readonly everyMs: number;
  /** The warning logged when a pass throws; the next pass tries again. */
  readonly failureMessage: string;
  /** When the first pass starts: at once (the default), or one interval after the start. */
  readonly firstPass?: 'now' | 'after-interval';
  /**
   * A pass that falls due while the previous one still runs is skipped rather than run beside it.
   */
  readonly oneAtATime?: boolean;
  run(): Promise<void>;
}
