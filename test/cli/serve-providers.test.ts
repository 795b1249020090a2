import t from 'tap';
import { runEns } from '../harness/ens-process.ts';
import { startTestService } from '../harness/service.ts';

/**
 * A newcomer switching a channel to a provider gets one line naming the plugin and the field when
 * a setting is wrong, and exit code 2: never a stack trace, never a start on half a configuration.
 */
const svc = await startTestService(t, { roles: [] });

const cases: [string, Record<string, string>, RegExp][] = [
  [
    'a misspelt setting',
    {
      ENS_PROVIDERS: 'email=@ens/plugin-smtp',
      ENS_PROVIDER_CONFIG:
        '{"@ens/plugin-smtp": {"host": "127.0.0.1", "prot": 2525, "fromAddress": "a@b.example"}}',
    },
    /^ens: provider plugin @ens\/plugin-smtp: config \/prot is not a setting this plugin knows\n$/,
  ],
  [
    'a missing credential',
    {
      ENS_PROVIDERS: 'sms=@ens/plugin-twilio',
      ENS_PROVIDER_CONFIG:
        '{"@ens/plugin-twilio": {"accountSid": "AC00000000000000000000000000000000", "from": ' +
        '"+15005550006"}}',
    },
    /^ens: provider plugin @ens\/plugin-twilio: config .*authToken/,
  ],
  [
    'a package that is not installed',
    { ENS_PROVIDERS: 'sms=@ens/plugin-twillio', ENS_PROVIDER_CONFIG: '{}' },
    /^ens: provider plugin @ens\/plugin-twillio could not be imported \(is it installed\?\)/,
  ],
  [
    'a plugin on a channel it does not serve',
    {
      ENS_PROVIDERS: 'push=@ens/plugin-twilio',
      ENS_PROVIDER_CONFIG:
        '{"@ens/plugin-twilio": {"accountSid": "AC00000000000000000000000000000000", ' +
        '"authToken": "t", "from": "+15005550006"}}',
    },
    /^ens: provider plugin @ens\/plugin-twilio: channels does not include push/,
  ],
];

for (const [what, env, message] of cases) {
  t.test(what, async (t) => {
    const r = await runEns(['serve'], { ...svc.env, ...env, PORT: '0' });
    t.equal(r.code, 2, 'exit code 2');
    t.match(r.stderr, message);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });
}
