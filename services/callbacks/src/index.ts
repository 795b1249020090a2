export { startCallbacks, type CallbacksRole } from './dispatcher.ts';
export { ensSignature, verifyEnsSignature, standardWebhookHeaders } from './post/signature.ts';
export { postCallback } from './post/poster.ts';
