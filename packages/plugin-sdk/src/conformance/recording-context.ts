import type { PluginContext, RecipientReport, StatusUpdate } from '../contract.ts';

/** A PluginContext that keeps what the plugin did, for the kit's assertions. */
export interface RecordingContext extends PluginContext {
  reports: StatusUpdate[];
  /** Reports about recipients (bounces, complaints, opt-outs), in order (SDK 1.3). */
  recipientReports: RecipientReport[];
  logs: { level: string; obj: object; msg?: string }[];
  /** URLs the plugin fetched through `outbound`, in order. */
  outboundUrls: string[];
  /** Resolves with the first report that matches, or null after `ms`. */
  waitForReport(match: (u: StatusUpdate) => boolean, ms: number): Promise<StatusUpdate | null>;
  /** Resolves with the first recipient report that matches, or null after `ms` (SDK 1.3). */
  waitForRecipientReport(
    match: (r: RecipientReport) => boolean,
    ms: number,
  ): Promise<RecipientReport | null>;
}

export function recordingContext(
  media: Record<string, { bytes: Buffer; mediaType: string }> = {},
): RecordingContext {
  const reports: StatusUpdate[] = [];
  const recipientReports: RecipientReport[] = [];
  const logs: RecordingContext['logs'] = [];
  const waiters = new Set<() => void>();
  const log = (level: string) => (obj: object, msg?: string) => void logs.push({ level, obj, msg });
  const outboundUrls: string[] = [];
  return {
    reports,
    recipientReports,
    logs,
    outboundUrls,
    // The kit's fakes listen on loopback, which ENS's guard refuses by default: this guard checks
    // only the URL's form and records what went through it, so a test can assert that a plugin
    // sends client-supplied addresses through the guard.
    outbound: {
      check(url) {
        const parsed = URL.canParse(url) ? new URL(url) : null;
        return parsed && (parsed.protocol === 'https:' || parsed.protocol === 'http:')
          ? { ok: true }
          : { ok: false, detail: 'must be an http or https URL' };
      },
      async fetch(url, init) {
        outboundUrls.push(url);
        return fetch(url, { ...init, redirect: 'manual' });
      },
    },
    logger: { info: log('info'), warn: log('warn'), error: log('error') },
    media: {
      async get(key) {
        const m = media[key];
        if (!m) throw new Error(`no media stored under ${key}`);
        return m;
      },
    },
    async reportStatus(u) {
      reports.push(u);
      for (const w of waiters) w();
    },
    async reportRecipient(r) {
      recipientReports.push(r);
      for (const w of waiters) w();
      return { entries: 1 };
    },
    waitForReport: (match, ms) => waitIn(reports, match, ms),
    waitForRecipientReport: (match, ms) => waitIn(recipientReports, match, ms),
  };

  /** The first element of `list` that matches, now or as reports arrive, or null after `ms`. */
  function waitIn<T>(list: readonly T[], match: (x: T) => boolean, ms: number): Promise<T | null> {
    const found = list.find(match);
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => {
      const check = () => {
        const f = list.find(match);
        if (f) done(f);
      };
      const done = (v: T | null) => {
        clearTimeout(timer);
        waiters.delete(check);
        resolve(v);
      };
      const timer = setTimeout(() => done(null), ms);
      waiters.add(check);
    });
  }
}
