import { startTestService, type Teardown, type TestService } from '../harness/service.ts';

/** The whatsapp plugin's webhook secrets in the OpenAPI tests; its Graph API is never reached. */
export const WHATSAPP = { appSecret: 'openapi-app-secret', verifyToken: 'openapi-verify-token' };

/**
 * An ENS whose document lists provider webhook routes too: whatsapp goes through its plugin (which
 * has webhooks), pointed at a closed port, so a send fails later without leaving the machine.
 */
export function startDocumentedService(
  t: Teardown,
  env: Record<string, string> = {},
): Promise<TestService> {
  return startTestService(t, {
    env: {
      ENS_PROVIDERS: 'whatsapp=@ens/plugin-whatsapp',
      ENS_PROVIDER_CONFIG: JSON.stringify({
        '@ens/plugin-sandbox': { handsetDelayMs: 100 },
        '@ens/plugin-whatsapp': {
          accessToken: 'openapi-test',
          phoneNumberId: '1234567',
          graphUrl: 'http://127.0.0.1:9',
          ...WHATSAPP,
        },
      }),
      ...env,
    },
  });
}
