import { EnsError, OperatorError } from '@ens/plugin-sdk';

export type EngineName = 'postgres' | 'nats';

/**
 * Thrown when an engine's executables cannot be found. The message is a single
 * line naming what to install, because it is shown as-is to whoever runs `npm start`.
 */
export class EngineMissingError extends OperatorError {
  static override readonly code: string = 'ENS_ERR_ENGINE_MISSING';
  readonly engine: EngineName;
  /** Directories that were searched, for diagnostics. */
  readonly searched: readonly string[];

  constructor(engine: EngineName, message: string, searched: readonly string[]) {
    super(message);
    this.engine = engine;
    this.searched = searched;
  }
}

/**
 * Thrown when the service user an engine must run as cannot reach its programs or its data (a
 * root shell's mode-700 home). One line with the fix, for whoever runs `npm start`.
 */
export class EngineUnreachableError extends OperatorError {
  static override readonly code: string = 'ENS_ERR_ENGINE_UNREACHABLE';
  constructor(
    readonly engine: EngineName,
    message: string,
  ) {
    super(message);
  }
}

/** Thrown when an engine was found but did not come up; `output` holds its last log lines. */
export class EngineStartError extends EnsError {
  static override readonly code: string = 'ENS_ERR_ENGINE_START';
  readonly engine: EngineName;
  readonly output: string;

  constructor(engine: EngineName, message: string, output = '') {
    super(output ? `${message}\n${output}` : message);
    this.engine = engine;
    this.output = output;
  }
}
