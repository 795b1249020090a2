import { OperatorError } from '@ens/plugin-sdk';

/** A configuration value the operator must fix: the process stops with this one line, exit 2. */
export class ConfigError extends OperatorError {
  static override readonly code: string = 'ENS_ERR_CONFIG';
}
