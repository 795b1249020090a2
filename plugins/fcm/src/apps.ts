import { permanentError, type OutboundMessage } from '@ens/plugin-sdk';
import { FCM_BASE_URL, type FcmConfig } from './config.ts';
import { FcmApp } from './fcm-app.ts';
import { readServiceAccount } from './service-account.ts';

/** The configured Firebase projects, and how a send picks one. */
export class AppRegistry {
  readonly #apps: Map<string, FcmApp>;
  readonly #default: FcmApp;
  /** With a single serviceAccount there is nothing to choose, and push_app is not read. */
  readonly #multi: boolean;

  constructor(config: FcmConfig, hooks: { onTokenRefused?: (app: FcmApp) => void } = {}) {
    const common = {
      baseUrl: config.baseUrl ?? FCM_BASE_URL,
      timeoutMs: config.timeoutMs ?? 10_000,
      onTokenRefused: hooks.onTokenRefused,
    };
    if (config.serviceAccount !== undefined && config.apps !== undefined) {
      throw new Error(
        'fcm: config has both serviceAccount and apps; give one (apps for several Firebase ' +
          'projects)',
      );
    }
    if (config.serviceAccount !== undefined) {
      if (config.defaultApp !== undefined)
        throw new Error('fcm: config /defaultApp is only for apps');
      const app = new FcmApp(
        'default',
        readServiceAccount(config.serviceAccount, '/serviceAccount'),
        { ...common, projectId: config.projectId },
      );
      this.#apps = new Map([[app.name, app]]);
      this.#default = app;
      this.#multi = false;
      return;
    }
    const entries = Object.entries(config.apps ?? {});
    if (entries.length === 0)
      throw new Error(
        'fcm: config needs serviceAccount (a service-account key file) or apps (several, by name)',
      );
    if (config.projectId !== undefined)
      throw new Error(
        'fcm: config /projectId is only for serviceAccount; with apps each app sends to its ' +
          "service account's project_id",
      );
    this.#apps = new Map(
      entries.map(([name, sa]) => [
        name,
        new FcmApp(name, readServiceAccount(sa, `/apps/${name}`), common),
      ]),
    );
    const defaultName = config.defaultApp ?? (entries.length === 1 ? entries[0]![0] : undefined);
    if (defaultName === undefined)
      throw new Error(
        `fcm: config /defaultApp is required when apps holds more than one app (${this.names()})`,
      );
    const d = this.#apps.get(defaultName);
    if (!d)
      throw new Error(
        `fcm: config /defaultApp "${defaultName}" is not one of apps (${this.names()})`,
      );
    this.#default = d;
    this.#multi = true;
  }

  /** The app a send goes through: the tenant's push_app, else the default. */
  pick(m: OutboundMessage): FcmApp {
    const wanted = m.tenantSettings.push_app;
    if (!this.#multi || wanted === undefined || wanted === null || wanted === '')
      return this.#default;
    const app = typeof wanted === 'string' ? this.#apps.get(wanted) : undefined;
    if (!app)
      throw permanentError(
        `fcm: tenant ${m.tenant} sets push_app "${String(wanted)}", which is not a configured FCM app (${this.names()})`,
      );
    return app;
  }

  all(): FcmApp[] {
    return [...this.#apps.values()];
  }

  names(): string {
    return [...this.#apps.keys()].join(', ');
  }
}
