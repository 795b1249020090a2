/** A configuration value the operator must fix: the process stops with this one line, exit 2. */
export class ConfigError extends Error {
  readonly code = 'ENS_ERR_CONFIG';
  override readonly name = 'ConfigError';
}
