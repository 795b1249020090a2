export { buildApi, type ApiOptions } from './server.ts';
export { AccessTokens, CLIENT_CREDENTIALS } from './auth/access-token.ts';
