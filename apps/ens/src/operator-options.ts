/**
 * Flags every operator command takes (one invocation of `ens`): set by main.ts from the command
 * line before the command runs, read where the command opens its database.
 */
export const operatorOptions = {
  /** --own-engines: start engines under ENS_DATA_DIR even while another serve runs elsewhere. */
  ownEngines: false,
};
