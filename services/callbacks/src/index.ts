export { startCallbacks, type CallbacksRole } from './dispatcher.ts';
export { ensSignature, verifyEnsSignature, standardWebhookHeaders } from './delivery/signature.ts';
export { postCallback } from './delivery/poster.ts';
