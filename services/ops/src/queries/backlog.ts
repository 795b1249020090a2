import { CHANNELS, type Channel } from '@ens/core';
import { readBacklogAge, type Db } from '@ens/core/internal';

/**
 * Past this many seconds, waiting work means no process is taking it: a healthy deployment claims
 * due work within a second or two, and the sweeper re-wakes what waits longer than ENS_SWEEP_GRACE
 * (30 s by default), so work still waiting after twice that was not taken even when woken again.
 * The dashboard warns past it; the EnsBacklogAging rule in deploy/prometheus/ens-alerts.yml uses
 * the same number, and services/ops/test/prometheus-rules.test.ts checks that they agree.
 */
export const BACKLOG_WARN_SECONDS = 60;

export interface ChannelBacklog {
  channel: Channel;
  /** Age of the oldest delivery due and not claimed; 0 when none waits. */
  delivery_seconds: number;
  /** Age of the oldest callback due and not posted; 0 when none waits. */
  callback_seconds: number;
  /** Either age is past BACKLOG_WARN_SECONDS. */
  aging: boolean;
}

export interface Backlog {
  channels: ChannelBacklog[];
  warn_seconds: number;
  /** The channels where work has waited past the threshold. */
  aging: Channel[];
}

/**
 * Ages in seconds, per channel in CHANNELS order, read from PostgreSQL (the whole deployment's).
 */
export async function loadBacklog(db: Db): Promise<Backlog> {
  const ages = await readBacklogAge(db);
  const age = (kind: 'delivery' | 'callback', channel: Channel) =>
    ages.find((a) => a.kind === kind && a.channel === channel)?.ageSeconds ?? 0;
  const channels = CHANNELS.map((channel) => {
    const delivery_seconds = age('delivery', channel);
    const callback_seconds = age('callback', channel);
    return {
      channel,
      delivery_seconds,
      callback_seconds,
      aging: Math.max(delivery_seconds, callback_seconds) > BACKLOG_WARN_SECONDS,
    };
  });
  return {
    channels,
    warn_seconds: BACKLOG_WARN_SECONDS,
    aging: channels.filter((c) => c.aging).map((c) => c.channel),
  };
}
