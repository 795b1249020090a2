import { OperatorError } from '@ens/plugin-sdk';

/** A mistake in how a command was called: printed as one line on stderr, exit code 2 (or given). */
export class UsageError extends OperatorError {
  static override readonly code: string = 'ENS_ERR_USAGE';
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
  }
}

/** Commands print exactly one JSON document on stdout, so scripts can pipe them to jq. */
export function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
