/**
 * @ens/core, the public surface: the domain every role and embedder speaks. Configuration, the
 * error registry, the wire schemas (TypeBox: validation, types and OpenAPI from one source), the
 * handoff rules, the stores a Runtime holds, migrations and the outbound-address guard.
 *
 * The machinery the roles share (PostgreSQL pools and batching, the JetStream topology and its
 * consume loops, wake-ups, the sweeper, metric counters, secrets) is `@ens/core/internal`: it may
 * change with any release and is not for plugins or embedders.
 */
export {
  loadConfig,
  ConfigError,
  MASTER_KEY_MISMATCH,
  type Config,
  type OpsConfig,
} from './config/load.ts';
export {
  HttpError,
  Errors,
  isHttpError,
  type HttpErrorOptions,
  type FieldError,
} from './errors.ts';
export { EnsError, OperatorError, isOperatorError } from '@ens/plugin-sdk';
export { openRuntime, createLogger, poolSizes, type Runtime } from './runtime.ts';
export { migrate } from './db/migrate.ts';

export { CHANNELS, Channel, DELIVERY_STATUSES, DeliveryStatus } from './schemas/channel.ts';
export {
  InlineImage,
  Content,
  MessageEntry,
  Handoff,
  AcceptedDelivery,
  AcceptedHandoff,
} from './schemas/handoff.ts';
export {
  CallbackPayload,
  DeliveryRecord,
  DeliveryPage,
  DeliveryQuery,
} from './schemas/delivery.ts';
export { TenantId, TenantSettings, TenantCreate, TenantPatch, Tenant } from './schemas/tenant.ts';
export {
  PushPlatform,
  UserId,
  DeviceToken,
  WebPushSubscription,
  DevicePut,
  Device,
  DeviceList,
} from './schemas/device.ts';
export { ErrorBody } from './schemas/error-body.ts';
export {
  SUPPRESSION_REASONS,
  SUPPRESSION_SOURCES,
  SuppressionReason,
  SuppressionSource,
  SuppressionScope,
  Suppression,
  SuppressionPut,
  SuppressionQuery,
  SuppressionPage,
  ConsentPolicy,
  SuppressionAddressParams,
  SuppressionDeleteQuery,
  SuppressionEntries,
  type SuppressionReasonT,
  type SuppressionSourceT,
} from './schemas/suppression.ts';
export { serialiseCallback } from './schemas/callback-payload.ts';
export {
  RECORD_FIELDS,
  RECORD_FIELD_NAMES,
  CALLBACK_FIELDS,
  type RecordFieldName,
  type CallbackFieldName,
} from './domain/delivery-record.ts';

export { planDeliveries, type PlannedDelivery, type RuleLimits } from './domain/handoff-rules.ts';
export {
  CHANNEL_RULES,
  type ChannelRules,
  type ContentField,
  type SuppressionAddress,
} from './domain/channels.ts';
export { normalisePhone } from './phone.ts';
export { parseDuration, parseBackoff } from './durations.ts';
export { formatTimestamp, isIsoTimestamp, parseTimestamp } from './timestamps.ts';
export { newId } from './ids.ts';
export {
  nextRetryDelay,
  decideSendRetry,
  decideCallbackRetry,
  sendTimeoutMs,
  callbackLeaseMs,
} from './retry-policy.ts';

export {
  SchedulingStore,
  MAX_SEND_WEIGHT,
  parseSendWeight,
  parsePriorityEventTypes,
  type ClientSchedule,
  type Parsed,
} from './store/scheduling.ts';
export {
  acceptHandoff,
  refuseBeforeStoring,
  type AcceptInput,
  type AcceptOutcome,
} from './store/accept.ts';
export {
  accept,
  type AcceptDeps,
  type AcceptDraft,
  type Accepted,
  type HandoffToAccept,
  type Prepared,
} from './lifecycle/accept.ts';
export { resendDelivery, type ResendResult } from './lifecycle/resend.ts';
export { readFeed } from './store/feed.ts';
export { ClientStore, type ClientRow, type IssuedClient } from './store/clients.ts';
export { TenantStore } from './store/tenants.ts';
export { DeviceStore, MAX_DEVICES_PER_USER } from './store/devices.ts';
export { DeliveryStore } from './store/deliveries.ts';
export { CallbackStore, type DeadLetter } from './store/callbacks.ts';
export {
  SuppressionStore,
  suppressionError,
  type SuppressionInput,
  type SuppressionHit,
  type ReportKind,
} from './store/suppressions.ts';
export { normaliseAddress, addressWording } from './consent/address.ts';
export {
  signDeliveryToken,
  readDeliveryToken,
  returnPathFor,
  deliveryOfReturnPath,
  unsubscribeMailtoFor,
  deliveryOfUnsubscribeMailto,
  type TokenPurpose,
} from './consent/delivery-token.ts';
export { liveUnsubscribeDelivery } from './consent/unsubscribe-link.ts';
export { mediaKey, type MediaStore, type StoredMedia } from './media/media-store.ts';

export {
  checkOutboundUrl,
  resolvePublicAddress,
  type UrlCheck,
  type AddressCheck,
  type LookupAll,
} from './outbound/outbound-guard.ts';
export { guardedFetch, OutboundRefusedError, type GuardOptions } from './outbound/guarded-fetch.ts';
export { bodyExcerpt } from '@ens/plugin-sdk';
export { metricsRegistry } from './metrics.ts';
export { metricsText, serveClusterMetrics } from './cluster-metrics.ts';
