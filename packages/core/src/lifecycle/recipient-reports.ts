import type { NatsConnection } from '@nats-io/transport-node';
import { wakeFeed } from '../nats/wakeups.ts';
import type { SuppressionStore } from '../store/suppressions.ts';

type ReportForDelivery = SuppressionStore['reportForDelivery'];

/**
 * A report about one delivery (a bounce, a complaint, a refusal, an unsubscribe), applied by the
 * suppression store, with the feed woken after the commit when the delivery changed (a bounce or
 * complaint marks it). Callers use this rather than the store's method, so that no service
 * publishes the feed's wake-up itself. Resolves as the store's method does: null when no such
 * delivery exists.
 */
export async function reportForDelivery(
  deps: { suppressions: SuppressionStore; nc: NatsConnection },
  find: Parameters<ReportForDelivery>[0],
  report: Parameters<ReportForDelivery>[1],
): ReturnType<ReportForDelivery> {
  const res = await deps.suppressions.reportForDelivery(find, report);
  if (res?.changed) wakeFeed(deps.nc);
  return res;
}
