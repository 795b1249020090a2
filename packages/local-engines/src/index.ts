export { freePort } from './free-port.ts';
export {
  EngineMissingError,
  EngineStartError,
  EngineUnreachableError,
  type EngineName,
} from './engine-errors.ts';
export { findPostgresBinaries, type PostgresBinaries } from './postgres-binaries.ts';
export {
  startPostgres,
  POSTGRES_DATABASE,
  type PostgresHandle,
  type StartPostgresOptions,
} from './postgres.ts';
export {
  readPassword as readPostgresPassword,
  PASSWORD_FILE as POSTGRES_PASSWORD_FILE,
} from './postgres-password.ts';
export {
  findNatsServer,
  startNats,
  type NatsClusterNode,
  type NatsHandle,
  type StartNatsOptions,
} from './nats.ts';
export type { SupervisedEngine } from './supervised-engine.ts';
export { isProcessAlive } from './process-alive.ts';
