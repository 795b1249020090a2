export { opsConsole } from './console.ts';
export { SessionStore } from './session-store.ts';
export {
  startAlertEvaluator,
  evaluateAlerts,
  isFiring,
  type EvaluationResult,
} from './alerts/evaluator.ts';
export { AlertStore } from './alerts/alert-store.ts';
export { ALERTS_CLIENT_NAME, ALERTS_TENANT } from './alerts/notify.ts';
export * from './staff/index.ts';
