import {
  definePlugin,
  deviceGoneError,
  permanentError,
  transientError,
  type PluginContext,
} from '@ens/plugin-sdk';
import { AppRegistry } from './apps.ts';
import { ConfigSchema, type FcmConfig } from './config.ts';
import { buildMessage } from './fcm-message.ts';

/** Firebase Cloud Messaging over the HTTP v1 API, one registration token per send. */
export default definePlugin<FcmConfig>({
  name: 'fcm',
  channels: ['push'],
  pushPlatforms: ['fcm'],
  sdk: '^1.0.0',
  configSchema: ConfigSchema,
  create(config, context: PluginContext) {
    const apps = new AppRegistry(config, {
      onTokenRefused: (app) =>
        context.logger.warn(
          { app: app.name, projectId: app.projectId },
          'fcm: FCM refused the access token; exchanging a new one',
        ),
    });
    return {
      async send(m) {
        const device = m.device;
        if (!device)
          throw permanentError(
            'fcm: the push send carries no device; ENS sends to FCM one registration token at ' +
              'a time',
          );
        if (device.platform !== 'fcm')
          throw permanentError(
            `fcm: device platform is ${device.platform}, this plugin sends to fcm tokens only`,
          );
        // An empty token can never reach a device; unregistering it is what FCM's own answer would
        // cause.
        if (device.token === '')
          throw deviceGoneError('fcm: the device has an empty registration token');
        const app = apps.pick(m);
        return { providerMessageId: await app.send(buildMessage(device.token, m.content)) };
      },
      async checkCredentials() {
        const results = await Promise.allSettled(apps.all().map((a) => a.checkCredentials()));
        const failed = results.flatMap((r, i) =>
          r.status === 'rejected'
            ? [`app ${apps.all()[i]!.name}: ${(r.reason as Error).message}`]
            : [],
        );
        if (failed.length > 0) throw transientError(failed.join('; '));
      },
      async close() {
        // Nothing is held open: fetch's connections belong to the process-wide pool.
      },
    };
  },
});
