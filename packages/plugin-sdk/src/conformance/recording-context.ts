import type { PluginContext, StatusUpdate } from '../contract.ts';

/** A PluginContext that keeps what the plugin did, for the kit's assertions. */
export interface RecordingContext extends PluginContext {
  reports: StatusUpdate[];
  logs: { level: string; obj: object; msg?: string }[];
  /** Resolves with the first report that matches, or null after `ms`. */
  waitForReport(match: (u: StatusUpdate) => boolean, ms: number): Promise<StatusUpdate | null>;
}

export function recordingContext(media: Record<string, { bytes: Buffer; mediaType: string }> = {}): RecordingContext {
  const reports: StatusUpdate[] = [];
  const logs: RecordingContext['logs'] = [];
  const waiters = new Set<() => void>();
  const log = (level: string) => (obj: object, msg?: string) => void logs.push({ level, obj, msg });
  return {
    reports,
    logs,
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
    waitForReport(match, ms) {
      const found = reports.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve) => {
        const check = () => {
          const f = reports.find(match);
          if (f) done(f);
        };
        const done = (v: StatusUpdate | null) => {
          clearTimeout(timer);
          waiters.delete(check);
          resolve(v);
        };
        const timer = setTimeout(() => done(null), ms);
        waiters.add(check);
      });
    },
  };
}
