import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** One registry per process; roles running in the same process share it and /metrics shows all. */
export const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry, prefix: 'ens_' });

export const httpDuration = new Histogram({
  name: 'ens_http_request_duration_seconds',
  help: 'API request latency',
  labelNames: ['method', 'route', 'status'],
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [metricsRegistry],
});

export const deliveriesAccepted = new Counter({
  name: 'ens_deliveries_accepted_total',
  help: 'Deliveries accepted by POST /v2/messages',
  labelNames: ['channel'],
  registers: [metricsRegistry],
});

/*
 * The accept batcher's statements (one transaction, one commit each). With
 * ens_http_request_duration_seconds they say where an accept's time goes: its batch or the rest.
 */
export const acceptBatchDuration = new Histogram({
  name: 'ens_accept_batch_duration_seconds',
  help: 'Accept batches: from the statement sent to its answer, the commit included',
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  registers: [metricsRegistry],
});

export const acceptBatchHandoffs = new Histogram({
  name: 'ens_accept_batch_handoffs',
  help: 'Accept batches: handoffs sent together in one statement (each created, replayed or refused)',
  buckets: [1, 2, 4, 8, 16, 32, 64],
  registers: [metricsRegistry],
});

export const attemptsTotal = new Counter({
  name: 'ens_delivery_attempts_total',
  help: 'Provider send attempts by outcome (sent, transient, permanent, rate_limited)',
  labelNames: ['channel', 'provider', 'outcome'],
  registers: [metricsRegistry],
});

export const suppressedSends = new Counter({
  name: 'ens_suppressed_sends_total',
  help: "Deliveries the suppression list stopped before any provider call, by the entry's reason",
  labelNames: ['channel', 'reason'],
  registers: [metricsRegistry],
});

export const suppressionReports = new Counter({
  name: 'ens_suppression_reports_total',
  help:
    'Reports about recipients (refusals, bounces, complaints, opt-outs, opt-ins, unsubscribes) ' +
    'by source and kind',
  labelNames: ['source', 'kind'],
  registers: [metricsRegistry],
});

export const callbackPosts = new Counter({
  name: 'ens_callback_posts_total',
  help: 'Callback posts by result (delivered, retry, dead)',
  labelNames: ['result'],
  registers: [metricsRegistry],
});

export const callbacksDeferred = new Counter({
  name: 'ens_callbacks_deferred_total',
  help:
    "Callback wake-ups handed back to the queue because their client's receiver is slow and its " +
    'share of the post slots is full',
  registers: [metricsRegistry],
});

export const feedStamped = new Counter({
  name: 'ens_feed_rows_stamped_total',
  help: 'Delivery changes stamped into the change feed',
  registers: [metricsRegistry],
});

export const providerPace = new Gauge({
  name: 'ens_provider_pace_per_second',
  help: 'The sends per second a paced provider is held to, across all worker processes',
  labelNames: ['provider'],
  registers: [metricsRegistry],
  // One pace shared by every process: summing it over processes would multiply it.
  aggregator: 'max',
});

export const providerPaceWaiting = new Gauge({
  name: 'ens_provider_pace_waiting',
  help: "Sends of this process waiting for their provider's pace",
  labelNames: ['provider'],
  registers: [metricsRegistry],
});

export const sendWaiting = new Gauge({
  name: 'ens_send_waiting',
  help: 'Wake-ups this worker process holds for a send slot, per channel and client',
  labelNames: ['channel', 'client'],
  registers: [metricsRegistry],
});

export const mediaCollected = new Counter({
  name: 'ens_media_collected_total',
  help: 'Inline-image objects removed from media storage because no pending delivery used them',
  registers: [metricsRegistry],
});

export const retentionRemoved = new Counter({
  name: 'ens_retention_removed_total',
  help: 'Rows removed because their handoff was done and older than ENS_RETENTION, by table',
  labelNames: ['table'],
  registers: [metricsRegistry],
});

export const retentionBatches = new Counter({
  name: 'ens_retention_batches_total',
  help: 'Transactions the retention job committed; each removes at most its batch of deliveries',
  registers: [metricsRegistry],
});

export const jobLastRun = new Gauge({
  name: 'ens_job_last_run_timestamp_seconds',
  help: 'When a periodic job last ended a pass (succeeded or failed), in Unix seconds',
  labelNames: ['job'],
  registers: [metricsRegistry],
  // Several processes may run a job: the most recent pass of any of them.
  aggregator: 'max',
});

export const jobDuration = new Histogram({
  name: 'ens_job_duration_seconds',
  help: 'How long the passes of a periodic job take',
  labelNames: ['job'],
  buckets: [0.001, 0.01, 0.1, 0.5, 1, 5, 15, 60, 300],
  registers: [metricsRegistry],
});

export const jobFailures = new Counter({
  name: 'ens_job_failures_total',
  help:
    'Passes of a periodic job that failed (each is logged as a warning; the next pass tries ' +
    'again)',
  labelNames: ['job'],
  registers: [metricsRegistry],
});

export const sweeperRequeued = new Counter({
  name: 'ens_sweeper_requeued_total',
  help: 'Deliveries and callbacks re-enqueued because their wake-up was lost',
  labelNames: ['kind'],
  registers: [metricsRegistry],
});

export const leaderChangeRewoken = new Counter({
  name: 'ens_leader_change_rewoken_total',
  help:
    'Deliveries and callbacks still waiting after their due time since their consumer elected ' +
    'a leader, woken again (a nak the old leader answered and lost)',
  labelNames: ['kind'],
  registers: [metricsRegistry],
});

export const providerUp = new Gauge({
  name: 'ens_provider_up',
  help:
    '1 while a provider takes sends for its channel, 0 while it is taken out after transient ' +
    'failures',
  labelNames: ['channel', 'provider'],
  registers: [metricsRegistry],
  // Each process has its own fail-over breaker: 0 when any process has taken the provider out.
  aggregator: 'min',
});

export const devicesRemoved = new Counter({
  name: 'ens_push_devices_removed_total',
  help: 'Push devices removed from the registry because their provider reported the token dead',
  labelNames: ['provider'],
  registers: [metricsRegistry],
});

export const webhookRequests = new Counter({
  name: 'ens_webhook_requests_total',
  help: 'Provider webhook requests by plugin and answer status',
  labelNames: ['plugin', 'status'],
  registers: [metricsRegistry],
});
