/**
 * @ens/core/internal: the machinery the roles share. Not a stable interface: plugins use
 * @ens/plugin-sdk, embedders and the roles' domain code use @ens/core.
 */
export {
  createPool,
  createAsyncCommitPool,
  inTransaction,
  isoSql,
  withClient,
  queryByIds,
  type Db,
  type DbClient,
} from './db/pool.ts';
export { Coalescer, type CoalescerOptions } from './db/coalescer.ts';
export { isDatabaseUnavailable } from './db/unavailable.ts';
export { isNatsUnavailable } from './nats/unavailable.ts';

export {
  SEND_STREAM,
  SEND_LANES,
  CALLBACK_STREAM,
  sendSubject,
  sendConsumer,
  CALLBACK_SUBJECT,
  CALLBACK_CONSUMER,
  FEED_WAKE_SUBJECT,
  ACK_WAIT_MS,
  connectNats,
  ensureTopology,
} from './nats/topology.ts';
// No wakeSenders, wakeFeed or wakeCallbacks: core's doors publish the wake-ups after their own
// commits (test/architecture/wake-ups.test.ts).
export {
  BULK_WAKEUPS,
  parseSendWakeup,
  parseCallbackWakeup,
  type SendWakeup,
  type CallbackWakeup,
  type WakeupTarget,
} from './nats/wakeups.ts';
export { FairQueue, type Flow, type FlowWeights } from './scheduling/fair-queue.ts';
export { FairSlots, type SlotWork } from './scheduling/fair-slots.ts';
export { SchedulingPolicy } from './store/scheduling.ts';
export { ProviderPacer, type Pace } from './scheduling/provider-pacer.ts';
export {
  consumeWorkQueue,
  type WorkQueueConsumer,
  type WorkQueueOptions,
} from './nats/work-queue.ts';
export { handBack, isRedelivered } from './nats/hand-back.ts';
export {
  registerLoop,
  downLoops,
  allLoops,
  consumerUp,
  type LoopHealth,
  type LoopState,
} from './nats/loop-health.ts';

export { startJobs, runJob, type RunningJobs } from './jobs/scheduler.ts';
export type { Job } from './jobs/job.ts';
export {
  JOB_EVERY_MS,
  workerJobs,
  callbacksJobs,
  requeueOverdueDeliveries,
  requeueOverdueCallbacks,
  purgeExpiredIdempotencyKeys,
  purgeLapsedSuppressions,
  collectUnusedMedia,
  removeExpiredRecords,
  keepStatisticsFresh,
  type JobName,
} from './jobs/catalogue.ts';
export { measureBacklogIn } from './backlog.ts';
export {
  readBacklogAge,
  type BacklogAge,
  type BacklogKind,
} from './store/read-models/backlog-age.ts';
export {
  httpDuration,
  deliveriesAccepted,
  attemptsTotal,
  suppressedSends,
  suppressionReports,
  callbackPosts,
  callbacksDeferred,
  feedStamped,
  jobLastRun,
  jobDuration,
  jobFailures,
  sweeperRequeued,
  mediaCollected,
  retentionRemoved,
  retentionBatches,
  sendWaiting,
  providerPace,
  providerPaceWaiting,
  providerUp,
  devicesRemoved,
  webhookRequests,
} from './metrics.ts';

export { stampBatch, stampClient } from './store/feed.ts';
export { attemptInFlightSql } from './store/attempt-rows.ts';
export { callbackUrlSql } from './store/callbacks.ts';
export { purgeIdempotencyKeys } from './store/accept.ts';
export {
  AcceptBatcher,
  acceptBatcherFor,
  type AcceptBatcherOptions,
} from './store/accept-batcher.ts';
export { ClientDirectory } from './store/client-directory.ts';
export { recordOutcome, type OutcomeRetryOptions } from './store/outcome-retry.ts';
// The console's read models: every statement it runs against the delivery tables.
export {
  searchDeliveries,
  loadDelivery,
  handoffIdsEnd,
  SearchTooSlow,
  PAGE_SIZE,
  SIBLINGS_SHOWN,
  type DeliveryFilters,
  type DeliveryListRow,
  type SearchTotal,
  type DeliveryDetail,
  type SiblingRow,
} from './store/read-models/console-deliveries.ts';
export {
  listDeadLetterGroups,
  findDeadLetterGroup,
  deadLetterIdsOfGroup,
  listDeadLetters,
  DEAD_PAGE,
  GROUPS_SHOWN,
  type DeadLetterGroup,
  type DeadLetterRow,
} from './store/read-models/dead-letters.ts';
export {
  DELIVERY_COUNTS_SQL,
  countRecentDeliveries,
  providerOutcomes,
  callbackQueueCounts,
  loadWaitingFlows,
  loadProviderPaces,
  type DeliveryCountRow,
  type ProviderOutcomes,
  type WaitingFlow,
  type ProviderPaceRow,
} from './store/read-models/dashboard.ts';
export {
  RATES_SQL,
  readTenantRates,
  type TenantRateCounts,
} from './store/read-models/consent-rates.ts';
export {
  measureAlertRules,
  eventTypesSeen,
  type RuleMeasure,
} from './store/read-models/alert-measures.ts';
export { usageTodayOf } from './store/read-models/client-usage.ts';
export { existingDeliveries } from './store/read-models/delivery-presence.ts';
export { CLIENT_CHANGES_CHANNEL } from './store/clients.ts';
export type {
  ClaimedDelivery,
  ClaimMiss,
  AttemptResult,
  Transition,
  StatusReport,
} from './store/deliveries.ts';
export type {
  ClaimedCallback,
  CallbackClaim,
  InProcessPoster,
  PostResult,
} from './store/callbacks.ts';
export type { DeviceUpsert } from './store/devices.ts';

export { hashSecret, verifySecret } from './secrets/password-hash.ts';
export { SecretBox, deriveKey } from './secrets/secret-box.ts';
export { resolveMasterKey } from './secrets/master-key.ts';
export { DirectoryMediaStore } from './media/directory-store.ts';
export {
  collectIfUnused,
  collectUnusedMediaPass,
  recordMediaPuts,
} from './media/media-collector.ts';
export { answerChildren, askSupervisor } from './supervisor-ipc.ts';
export { refreshStatistics, staleTables, GROWING_TABLES } from './db/table-statistics.ts';
export {
  retentionRound,
  RETENTION_TABLES,
  type RetentionOptions,
  type RetentionRoundResult,
  type RetentionTable,
} from './retention/retention-job.ts';
export { pinnedDispatcher, closeOutboundConnections } from './outbound/pinned-dispatcher.ts';
export { allVariables, VARIABLES } from './config/variables.ts';
export type { EnvVar } from './config/env-var.ts';
export {
  startTracing,
  TRACING_OFF,
  tracesUrl,
  tracingWanted,
  type Tracing,
} from './tracing/start-tracing.ts';
export { tracingOn } from './tracing/switch.ts';
export { contextFrom, traceparentOf, validTraceparent } from './tracing/trace-context.ts';
export {
  endAcceptSpan,
  endAttemptSpan,
  endCallbackPostSpan,
  noteAccepted,
  noteHandoff,
  startAcceptSpan,
  startAttemptSpan,
  startCallbackPostSpan,
} from './tracing/spans.ts';
export { findHostileInput, MAX_DEPTH } from './input-hygiene.ts';
export { redactUrl, SECRET_QUERY_PARAMS } from './log-redaction.ts';
