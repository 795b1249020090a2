export { buildApi, type ApiOptions } from './server.ts';
export { AccessTokens, CLIENT_CREDENTIALS } from './auth/access-token.ts';
export { webhookRoutes, type WebhookProvider } from './routes/webhooks.ts';
export { buildHealthServer } from './health-server.ts';
export { serveClusterRateLimits } from './limits/rate-limits.ts';
