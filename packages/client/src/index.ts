export {
  createEnsClient,
  type AcceptedHandoff,
  type EnsApi,
  type EnsClient,
  type EnsClientOptions,
  type Handoff,
  type Suppression,
} from './client.js';
export { TokenError, TokenSource, type ClientCredentials } from './tokens.js';
export { CallbackVerificationError, verifyCallback, type CallbackPayload } from './callbacks.js';
export type { components, operations, paths } from './schema.js';
