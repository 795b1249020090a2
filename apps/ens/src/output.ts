/** A mistake in how a command was called: printed as one line on stderr, exit code 2 (or given). */
export class UsageError extends Error {
  constructor(message: string, readonly exitCode = 2) {
    super(message);
  }
}

/** Commands print exactly one JSON document on stdout, so scripts can pipe them to jq. */
export function print(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/** Errors that are the operator's to fix (bad configuration or plugin settings, a missing engine): one line, exit 2. */
const OPERATOR_ERRORS = new Set(['ENS_ERR_CONFIG', 'ENS_ERR_ENGINE_MISSING', 'ENS_ERR_PLUGIN']);

export function isOperatorError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && OPERATOR_ERRORS.has(code);
}
